//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/examples/internal/rbactest"
	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// The sharded e2e test runs the operator as separate processes: the test
// binary run again with replicaEnv naming the replica, which runs the
// operator's run, as main does, with SHARD_NAMESPACE set. Each replica
// records every write it sends (a JSON line per write, at its transport)
// to the file recordsEnv names.
const (
	replicaEnv = "WEBSITE_SHARD_REPLICA"
	recordsEnv = "WEBSITE_SHARD_RECORDS"
)

// runIfReplica runs the operator as a sharded replica if the test binary
// was started as one, and returns its exit code and true; else 0, false.
func runIfReplica() (int, bool) {
	name := os.Getenv(replicaEnv)
	if name == "" {
		return 0, false
	}
	return replicaMain(name), true
}

// sentWrite is one write a replica sent.
type sentWrite struct {
	Replica string `json:"r"`
	Wall    int64  `json:"w"` // Unix ns, when it was sent
	Method  string `json:"m"`
	Path    string `json:"p"`
	Code    int    `json:"c"`
	// Metadata marks the writes of the metadata client: the sharder's
	// labels and the acknowledgements of handovers, not the Reconciler's.
	Metadata bool `json:"md,omitempty"`
}

// replicaMain runs the operator until SIGTERM and returns the exit code.
func replicaMain(name string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "website replica %s: %v\n", name, err)
		return 2
	}
	cfg, err := manager.GetConfig()
	if err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(os.Getenv(recordsEnv), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	var mu sync.Mutex
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet || req.Method == http.MethodHead {
				return rt.RoundTrip(req)
			}
			w := sentWrite{Replica: name, Wall: time.Now().UnixNano(), Method: req.Method, Path: req.URL.Path,
				Metadata: strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata")}
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				w.Code = resp.StatusCode
			}
			b, _ := json.Marshal(w)
			mu.Lock()
			defer mu.Unlock()
			_, _ = f.Write(append(b, '\n')) // one write(2): whole lines even if killed
			return resp, err
		})
	})
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000000"), prefix, args)
	}, funcr.Options{})
	if err := run(manager.SignalContext(context.Background()), cfg, log.WithValues("replica", name)); err != nil {
		return fail(err)
	}
	return 0
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// replica is one operator process.
type replica struct {
	name, logPath, records, metrics string
	cmd                             *exec.Cmd
	exited                          chan struct{}
	err                             error // once exited is closed
}

// startReplicas starts the replicas names, as the user of kubeconfig, with
// their Leases in RoutesNamespace. They are stopped (SIGTERM, then
// SIGKILL) when the test ends.
func startReplicas(t *testing.T, kubeconfig string, names ...string) []*replica {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out []*replica
	for _, name := range names {
		r := &replica{name: name, logPath: filepath.Join(dir, name+".log"), records: filepath.Join(dir, name+".jsonl"),
			metrics: freeAddr(t), exited: make(chan struct{})}
		logFile, err := os.Create(r.logPath)
		if err != nil {
			t.Fatal(err)
		}
		r.cmd = exec.Command(self)
		r.cmd.Env = append(os.Environ(), replicaEnv+"="+name, recordsEnv+"="+r.records, "KUBECONFIG="+kubeconfig,
			"SHARD_NAMESPACE="+RoutesNamespace, "POD_NAME="+name, "HTTP_ADDR="+r.metrics)
		r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test
		if err := r.cmd.Start(); err != nil {
			logFile.Close()
			t.Fatalf("starting replica %s: %v", name, err)
		}
		go func() {
			r.err = r.cmd.Wait()
			logFile.Close()
			close(r.exited)
		}()
		out = append(out, r)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.stop(t)
			if b, err := os.ReadFile(r.logPath); err == nil && (t.Failed() || bytes.Contains(b, []byte("DATA RACE"))) {
				if bytes.Contains(b, []byte("DATA RACE")) {
					t.Errorf("replica %s reported a data race", r.name)
				}
				t.Logf("log of replica %s:\n%s", r.name, lastLines(b, 40))
			}
		}
	})
	return out
}

// stop sends SIGTERM and waits for the replica to exit; SIGKILL after
// 30s. It returns the exit error.
func (r *replica) stop(t *testing.T) error {
	select {
	case <-r.exited:
		return r.err
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("replica %s did not exit within 30s of SIGTERM", r.name)
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	return r.err
}

// writes reads the writes the replica has recorded.
func (r *replica) writes(t *testing.T) []sentWrite {
	t.Helper()
	b, err := os.ReadFile(r.records)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []sentWrite
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var w sentWrite
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("%s: %v", r.records, err)
		}
		out = append(out, w)
	}
	return out
}

// metric returns the value of the series whose line starts with series
// in the replica's /metrics, and whether it is there.
func (r *replica) metric(series string) (float64, bool) {
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

// freeAddr is a local address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// writeKubeconfig writes a kubeconfig file for the client certificate
// user, as an operator would load it.
func writeKubeconfig(t *testing.T, user *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: user.Host, CertificateAuthorityData: user.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{ClientCertificateData: user.CertData, ClientKeyData: user.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "operator"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// websiteOf is the Website a write of the Reconciler went to: the Website
// itself or its status, its Deployment or Service (named after it), or
// its route; "" for anything else (events).
func websiteOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+3 < len(parts); i++ {
		if parts[i] != "namespaces" {
			continue
		}
		ns, resource, name := parts[i+1], parts[i+2], parts[i+3]
		switch resource {
		case "websites", "deployments", "services":
			return ns + "/" + name
		case "configmaps": // a route, <namespace>.<name>
			if siteNS, siteName, ok := strings.Cut(name, "."); ok && ns == RoutesNamespace {
				return siteNS + "/" + siteName
			}
		}
	}
	return ""
}

// TestShardedWebsites runs the operator as 3 replica processes sharding
// the Websites, as the user of rbac.yaml. Each Website is placed by the
// ring of the replicas' members, with its Deployment and Service; each is
// reconciled by its owner alone (every write the Reconciler sends for it
// comes from that replica), and reaches Ready. Then one replica leaves
// (SIGTERM): its Websites move, with their children, to the others, which
// roll out a spec change of every Website to Ready again, and no Website
// is written by two replicas at once.
func TestShardedWebsites(t *testing.T) {
	kubeconfig := writeKubeconfig(t, rbactest.User(t, env, kube, "rbac.yaml"))
	replicas := startReplicas(t, kubeconfig, "r0", "r1", "r2")
	byMember := map[string]*replica{}
	eventually(t, "3 members in the ring, as the sharder sees them", func() error {
		leases, err := kube.CoordinationV1().Leases(RoutesNamespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		clear(byMember)
		for _, l := range leases.Items {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			for _, r := range replicas {
				if strings.HasPrefix(holder, r.name+"-") && l.Name == shard.LeaseName(Name, holder) {
					byMember[holder] = r
				}
			}
		}
		for _, r := range replicas {
			if v, ok := r.metric(`ctrlkit_shard_members{ring="` + Name + `"}`); ok && v == 3 && len(byMember) == 3 {
				return nil
			}
		}
		return fmt.Errorf("member Leases held: %d", len(byMember))
	})
	members := slices.Sorted(maps.Keys(byMember))

	// Four Websites for each member, in two namespaces, named so by the
	// ring of the three members.
	ring := shard.NewRing(members...)
	namespaces := []string{newNamespace(t, "sharded"), newNamespace(t, "sharded")}
	var sites []*v1alpha1.Website
	perMember := map[string]int{}
	for i := 0; len(sites) < 4*len(members); i++ {
		ns, name := namespaces[i%2], fmt.Sprintf("site-%03d", i)
		if m := ring.Owner(ns + "/" + name); perMember[m] < 4 {
			perMember[m]++
			sites = append(sites, &v1alpha1.Website{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: v1alpha1.WebsiteSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)}})
		}
	}
	for _, site := range sites {
		if err := admin.Create(t.Context(), site); err != nil {
			t.Fatal(err)
		}
	}
	ready := func(replicas int32) {
		t.Helper()
		for _, site := range sites {
			eventually(t, "Deployment of "+site.Name, deploymentIs(site, replicas, "nginx:1.27", 80))
			rollOut(t, site)
		}
		for _, site := range sites {
			eventually(t, "Website "+site.Namespace+"/"+site.Name+" Ready", statusIs(site, metav1.ConditionTrue))
			eventually(t, "Service and route of "+site.Name, func() error {
				if err := serviceIs(site, 80)(); err != nil {
					return err
				}
				return routeIs(site, 80)()
			})
		}
	}
	ready(1)

	// Placement: each Website, Deployment and Service is labelled for the
	// member the ring picks for the Website, and only that replica wrote
	// for it.
	owner := map[string]*replica{}
	for _, site := range sites {
		key := site.Namespace + "/" + site.Name
		want := ring.Owner(key)
		owner[key] = byMember[want]
		s, err := getSite(site.Namespace, site.Name)
		if err != nil {
			t.Fatal(err)
		}
		d, err := kube.AppsV1().Deployments(site.Namespace).Get(t.Context(), site.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := kube.CoreV1().Services(site.Namespace).Get(t.Context(), site.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		label := shard.ShardLabel(Name)
		if s.Labels[label] != want || d.Labels[label] != want || svc.Labels[label] != want {
			t.Errorf("%s: labelled for %q, its Deployment %q and Service %q; the ring picks %q", key, s.Labels[label], d.Labels[label], svc.Labels[label], want)
		}
	}
	writers := func() map[string]map[string][]int64 { // Website → replica → when it wrote
		out := map[string]map[string][]int64{}
		for _, r := range replicas {
			for _, w := range r.writes(t) {
				key := websiteOf(w.Path)
				if w.Metadata || key == "" || owner[key] == nil {
					continue // the sharder's labels, events, and Websites of other tests
				}
				if out[key] == nil {
					out[key] = map[string][]int64{}
				}
				out[key][w.Replica] = append(out[key][w.Replica], w.Wall)
			}
		}
		return out
	}
	wrote := writers()
	for _, site := range sites {
		key := site.Namespace + "/" + site.Name
		if got := slices.Sorted(maps.Keys(wrote[key])); !slices.Equal(got, []string{owner[key].name}) {
			t.Errorf("%s was written by replicas %v, want its owner %s alone", key, got, owner[key].name)
		}
	}
	counts := map[string]int{}
	for _, r := range replicas {
		n, _ := r.metric(`ctrlkit_shard_keys{controller="website",ring="` + Name + `"}`)
		counts[r.name] = int(n)
	}
	t.Logf("%d Websites Ready on 3 replicas; Websites each replica owns (this test's and earlier tests'): %v", len(sites), counts)

	// r2 leaves: its Websites move to r0 and r1 with their children, and
	// every Website rolls out a spec change.
	leaving := replicas[2]
	leftAt := time.Now()
	if err := leaving.stop(t); err != nil {
		t.Fatalf("replica %s exited with %v after SIGTERM, want 0", leaving.name, err)
	}
	t.Logf("%s exited %v after SIGTERM", leaving.name, time.Since(leftAt).Round(time.Millisecond))
	for _, site := range sites {
		updateSite(t, site, func(s *v1alpha1.WebsiteSpec) { s.Replicas = ptr.To[int32](2) })
	}
	ready(2)
	two := shard.NewRing(slices.DeleteFunc(slices.Clone(members), func(m string) bool { return byMember[m] == leaving })...)
	moved := 0
	wrote = writers()
	for _, site := range sites {
		key := site.Namespace + "/" + site.Name
		s, err := getSite(site.Namespace, site.Name)
		if err != nil {
			t.Fatal(err)
		}
		if want := two.Owner(key); s.Labels[shard.ShardLabel(Name)] != want {
			t.Errorf("%s is labelled for %q after %s left; the ring of the two left picks %q", key, s.Labels[shard.ShardLabel(Name)], leaving.name, want)
		}
		if owner[key] != leaving {
			if got := slices.Sorted(maps.Keys(wrote[key])); !slices.Equal(got, []string{owner[key].name}) {
				t.Errorf("%s, which stayed on %s, was written by replicas %v", key, owner[key].name, got)
			}
			continue
		}
		moved++
		// The leaving replica's writes all came before the new owner's.
		newOwner := byMember[two.Owner(key)].name
		last, first := slices.Max(wrote[key][leaving.name]), slices.Min(wrote[key][newOwner])
		if got := slices.Sorted(maps.Keys(wrote[key])); !slices.Equal(got, []string{newOwner, leaving.name}) || first <= last {
			t.Errorf("%s moved from %s to %s: written by %v, %s's last write at %s, %s's first at %s", key, leaving.name, newOwner, got,
				leaving.name, time.Unix(0, last).Format("15:04:05.000000"), newOwner, time.Unix(0, first).Format("15:04:05.000000"))
		}
	}
	if moved != 4 {
		t.Errorf("%d Websites moved when %s left, want its 4", moved, leaving.name)
	}
}
