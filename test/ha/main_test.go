//go:build linux

// Package ha is the process-level high-availability fault suite (issue 11):
// replicas of a leader-elected probe operator run as separate OS processes
// against one envtest control plane, faults are injected with signals
// (kill -9, SIGSTOP/SIGCONT) or with load, and every scenario is judged
// from what the replicas recorded and what the API server holds.
//
// Processes. The test binary is both the test and the replica: TestMain
// runs a replica instead of the tests when CTRLKIT_HA_REPLICA names one
// (replica_test.go), reading its settings from the JSON file
// CTRLKIT_HA_CONFIG names. A replica writes one JSON line per event to a
// file of its own with one write(2) each, so kill -9 loses none that was
// written; its logs go to a file next to it.
//
// What is checked after each scenario (records_test.go):
//   - lost: every object's last write by the churn driver was reconciled
//     afterwards (its observed annotation equals its gen) within a deadline;
//   - overlapping: no two replicas reconciled one key at the same time,
//     by wall time (one host, so CLOCK_REALTIME is shared), not counting
//     the time a process was stopped by SIGSTOP;
//   - non-leader writes: no replica sent a write (seen at its HTTP
//     transport) after another replica acquired the Lease, by the Lease's
//     acquireTime as the test process watched it, and the API server
//     received none (by its audit log).
//
// Sharding (issue 15, shard*_test.go): the same harness runs replicas of
// a sharded probe (manager.Options.Sharding over the ConfigMaps), scaled,
// killed, paused and stopped under churn. Besides lost and overlapping,
// each scenario is judged against the ownership history of every key,
// from its shard label writes as the API server's audit log shows them:
// no replica starts a Reconcile of, or writes to, a key it does not own
// at that moment (shard_records_test.go).
//
// Linux only: replicas die with the test through PR_SET_PDEATHSIG.
package ha

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var (
	// cfg is the admin rest config of the envtest control plane; the test
	// process's own clients (churn driver, Lease watcher, checks) use it.
	cfg *rest.Config
	// kube is an admin clientset for setup and checks.
	kube kubernetes.Interface
	// kubeconfig is a kubeconfig file for the control plane, which the
	// replicas load as a real operator would.
	kubeconfig string
	// auditLog is the API server's audit log: every write to a ConfigMap,
	// with when the server received it (audit_test.go).
	auditLog string
)

func TestMain(m *testing.M) {
	if name := os.Getenv(replicaEnv); name != "" {
		os.Exit(replicaMain(name, os.Getenv(configEnv)))
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "ha: KUBEBUILDER_ASSETS is not set: run `make test` (it builds kube-apiserver and etcd into bin/k8s), or point it at setup-envtest's binaries")
		os.Exit(1)
	}
	os.Exit(run(m))
}

// run starts the control plane, writes the replicas' kubeconfig, builds
// the admin client and runs the tests; it returns the exit code.
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ctrlkit-ha-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "ha: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "ha: %v\n", err)
		return 1
	}
	auditLog = filepath.Join(dir, "audit.log")
	env := &envtest.Environment{}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditLog).
		Set("audit-log-mode", "blocking") // an event is on disk before its response is sent
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "ha: starting envtest: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "ha: stopping envtest: %v\n", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "ha-replica", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ha: provisioning the replicas' user: %v\n", err)
		return 1
	}
	b, err := user.KubeConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ha: rendering the replicas' kubeconfig: %v\n", err)
		return 1
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "ha: %v\n", err)
		return 1
	}
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "ha: building clientset: %v\n", err)
		return 1
	}
	return m.Run()
}
