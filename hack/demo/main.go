// Command demo shows ctrlkit reconciling: it starts a local control plane
// (envtest's kube-apiserver and etcd, unless $KUBECONFIG names a cluster),
// runs the nsdefaults example operator against it as a separate process,
// makes changes an operator must react to, and prints what the operator
// did. It exits 0 when every step was observed, or 1 naming the step that
// was not. DEMO_KEEP=1 keeps the control plane and operator running.
//
// Run it through `make demo`, which builds the binaries it needs.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func run() error {
	operator := os.Getenv("OPERATOR")
	if operator == "" {
		return errors.New("OPERATOR is not set: run `make demo`, which builds the operator binary")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		say("Starting a local control plane (kube-apiserver + etcd from %s)", os.Getenv("KUBEBUILDER_ASSETS"))
		env := &envtest.Environment{}
		if _, err := env.Start(); err != nil {
			return fmt.Errorf("starting the control plane: %w", err)
		}
		defer func() { _ = env.Stop() }()
		user, err := env.AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return err
		}
		raw, err := user.KubeConfig()
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "ctrlkit-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
			return err
		}
	} else {
		say("Using the cluster in KUBECONFIG=%s", kubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	say("Starting the nsdefaults operator (%s)", operator)
	cmd := exec.Command(operator)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	logs, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the operator: %w", err)
	}
	logDone := make(chan struct{})
	go func() { defer close(logDone); prefix(logs, "    operator | ") }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	suffix := fmt.Sprintf("%d", time.Now().Unix()%100000)
	served, plain := "demo-served-"+suffix, "demo-plain-"+suffix
	steps := []struct {
		what string
		do   func(context.Context) error
		want func(context.Context) (bool, error)
	}{
		{
			what: "create namespace " + served + " labelled ctrlkit.io/defaults=true; expect a defaults ConfigMap",
			do:   func(ctx context.Context) error { return createNS(ctx, kube, served, true) },
			want: hasDefaults(kube, served),
		},
		{
			what: "create namespace " + plain + " without the label; expect nothing (checked after the next step)",
			do:   func(ctx context.Context) error { return createNS(ctx, kube, plain, false) },
			want: func(context.Context) (bool, error) { return true, nil },
		},
		{
			what: "edit the ConfigMap in " + served + " (log-level=debug); expect it repaired",
			do: func(ctx context.Context) error {
				cm, err := kube.CoreV1().ConfigMaps(served).Get(ctx, "defaults", metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.Data["log-level"] = "debug"
				_, err = kube.CoreV1().ConfigMaps(served).Update(ctx, cm, metav1.UpdateOptions{})
				return err
			},
			want: hasDefaults(kube, served),
		},
		{
			what: "delete the ConfigMap in " + served + "; expect it recreated",
			do: func(ctx context.Context) error {
				return kube.CoreV1().ConfigMaps(served).Delete(ctx, "defaults", metav1.DeleteOptions{})
			},
			want: hasDefaults(kube, served),
		},
		{
			what: "label namespace " + plain + "; expect a defaults ConfigMap there too",
			do: func(ctx context.Context) error {
				if _, err := kube.CoreV1().ConfigMaps(plain).Get(ctx, "defaults", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the unlabelled namespace %s got a ConfigMap (err=%v)", plain, err)
				}
				ns, err := kube.CoreV1().Namespaces().Get(ctx, plain, metav1.GetOptions{})
				if err != nil {
					return err
				}
				ns.Labels = map[string]string{"ctrlkit.io/defaults": "true"}
				_, err = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
				return err
			},
			want: hasDefaults(kube, plain),
		},
	}
	for i, s := range steps {
		say("Step %d: %s", i+1, s.what)
		start := time.Now()
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, s.want); err != nil {
			return fmt.Errorf("step %d (%s): not observed within 30s: %w", i+1, s.what, err)
		}
		fmt.Printf("    done in %v\n", time.Since(start).Round(time.Millisecond))
	}

	say("Resulting objects")
	for _, ns := range []string{served, plain} {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "defaults", metav1.GetOptions{})
		if err != nil {
			return err
		}
		owner := metav1.GetControllerOf(cm)
		fmt.Printf("    configmap %s/%s data=%v controller=%s/%s\n", ns, cm.Name, cm.Data, owner.Kind, owner.Name)
	}
	evs, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "source=nsdefaults"})
	if err == nil {
		for _, e := range evs.Items {
			fmt.Printf("    event %s %s/%s: %s (x%d)\n", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, max(e.Count, 1))
		}
	}

	if os.Getenv("DEMO_KEEP") != "" {
		say("DEMO_KEEP is set: the control plane and operator keep running. Try:\n    KUBECONFIG=%s kubectl get configmaps -A\nPress Ctrl-C to stop.", kubeconfig)
		<-ctx.Done()
	}

	say("Stopping the operator (SIGTERM) and waiting for a graceful exit")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		<-logDone
		if err != nil {
			return fmt.Errorf("operator exited with %w", err)
		}
	case <-time.After(45 * time.Second):
		return errors.New("operator did not exit within 45s of SIGTERM")
	}
	say("Demo complete: the operator created, repaired and recreated its ConfigMaps and shut down cleanly")
	return nil
}

func createNS(ctx context.Context, kube kubernetes.Interface, name string, labelled bool) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if labelled {
		ns.Labels = map[string]string{"ctrlkit.io/defaults": "true"}
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return err
}

// hasDefaults reports whether namespace ns holds the defaults ConfigMap with
// the operator's data.
func hasDefaults(kube kubernetes.Interface, ns string) func(context.Context) (bool, error) {
	want := map[string]string{"log-level": "info", "owner": "nsdefaults"}
	return func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "defaults", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return maps.Equal(cm.Data, want), nil
	}
}

// prefix copies r to stdout line by line, with p in front, keeping only the
// operator's info-level lines short enough to read.
func prefix(r io.Reader, p string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if slices.ContainsFunc([]string{"W1", "I1", "E1"}, func(k string) bool { return strings.HasPrefix(line, k) }) {
			continue // klog noise from client-go
		}
		fmt.Println(p + line)
	}
}
