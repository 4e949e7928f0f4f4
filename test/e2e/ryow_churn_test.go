//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// churnEnv, when set, makes the test binary run as the churn process of
// TestReadYourWritesUnderChurn instead of running tests: the value is the
// path of its churnConfig.
const churnEnv = "CTRLKIT_E2E_CHURN"

// init turns the test binary into the churn process before TestMain
// starts a control plane.
func init() {
	if path := os.Getenv(churnEnv); path != "" {
		os.Exit(churnMain(path))
	}
}

// churnConfig tells the churn process what to churn.
type churnConfig struct {
	Kubeconfig string
	Namespace  string
	Names      []string // ConfigMaps and Widgets of these names, when they exist
}

// ryowOps is how many write-then-read rounds each mode makes.
const ryowOps = 1000

// TestReadYourWritesUnderChurn writes and at once reads back through the
// lister 1,000 times — creates, updates, status writes and deletes, on a
// ConfigMap and on the Widget custom type — while another OS process
// patches the same objects as fast as it can. With read-your-own-writes
// (a manager's client) no read may be stale: the lister must hold the
// object at the written resourceVersion or later, or, after a delete, not
// hold that object. The same rounds through a client without it must see
// stale reads, which shows the check can fail.
func TestReadYourWritesUnderChurn(t *testing.T) {
	ns := newNamespace(t)
	names := make([]string, 16)
	for i := range names {
		names[i] = fmt.Sprintf("obj-%d", i)
	}
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager's caches to sync")

	stopChurn := startChurnProcess(t, churnConfig{Kubeconfig: writeKubeconfig(t, cfg), Namespace: ns, Names: names})

	r := &ryowRun{t: t, ns: ns, names: names, cms: cms.Lister(), ws: ws.Lister()}
	on := r.run(mgr.Client())
	// The same rounds through a client that does not wait, reading the
	// same cache.
	plain, err := client.New(cfg, client.Options{Scheme: newScheme(t), Mapper: mgr.RESTMapper(), FieldManager: "ryow-off"})
	if err != nil {
		t.Fatal(err)
	}
	off := r.run(plain)
	churned := stopChurn()

	t.Logf("churn process: %d patches", churned)
	t.Logf("read-your-own-writes on:  %s", on)
	t.Logf("read-your-own-writes off: %s", off)
	if churned < 100 {
		t.Errorf("the churn process made only %d patches: the objects were not churned", churned)
	}
	if on.stale != 0 {
		t.Errorf("%d of %d reads right after a write were stale with read-your-own-writes on; first: %s", on.stale, on.reads, on.first)
	}
	if off.stale == 0 {
		t.Errorf("no stale read in %d reads without read-your-own-writes: the check cannot see a stale cache", off.reads)
	}
	if on.reads < ryowOps/2 || off.reads < ryowOps/2 {
		t.Errorf("too few rounds were read back (on %d, off %d of %d): the writes kept failing", on.reads, off.reads, ryowOps)
	}
}

// ryowRun is one series of write-then-read rounds.
type ryowRun struct {
	t     *testing.T
	ns    string
	names []string
	cms   informer.Lister[*corev1.ConfigMap]
	ws    informer.Lister[*Widget]
}

// ryowResult counts what a series saw.
type ryowResult struct {
	reads, stale, conflicts int
	first                   string // the first stale read
	latencies               []time.Duration
}

func (r ryowResult) String() string {
	slices.Sort(r.latencies)
	q := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[int(p*float64(len(r.latencies)-1))]
	}
	return fmt.Sprintf("%d reads, %d stale, %d writes lost to the churn's conflicts, write p50 %v p99 %v",
		r.reads, r.stale, r.conflicts, q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond))
}

// run makes ryowOps rounds through c: each picks an object and a verb
// (create if absent, else update, status write or delete), writes, and
// reads the object back through the lister at once.
func (r *ryowRun) run(c *client.Client) ryowResult {
	t := r.t
	ctx := t.Context()
	var res ryowResult
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range ryowOps {
		name := r.names[rng.IntN(len(r.names))]
		widget := i%2 == 1
		var obj client.Object
		var cached client.Object
		if widget {
			if w, err := r.ws.Get(r.ns, name); err == nil {
				cached = w
			}
		} else if cm, err := r.cms.Get(r.ns, name); err == nil {
			cached = cm
		}
		start := time.Now()
		var err error
		verb := "create"
		switch {
		case cached == nil && widget:
			w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}, Spec: WidgetSpec{Size: int32(i)}}
			obj, err = w, c.Create(ctx, w)
		case cached == nil:
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}, Data: map[string]string{"i": fmt.Sprint(i)}}
			obj, err = cm, c.Create(ctx, cm)
		case rng.IntN(4) == 0:
			verb = "delete"
			obj = cached
			err = c.Delete(ctx, cached, client.DeleteOptions{UID: cached.GetUID()})
		case widget && rng.IntN(2) == 0:
			verb = "status"
			w := cached.(*Widget).DeepCopy()
			w.Status.ObservedSize = int32(i)
			obj, err = w, c.Status().Update(ctx, w)
		case widget:
			verb = "update"
			w := cached.(*Widget).DeepCopy()
			w.Spec.Size = int32(i)
			obj, err = w, c.Update(ctx, w)
		default:
			verb = "update"
			cm := cached.(*corev1.ConfigMap).DeepCopy()
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["i"] = fmt.Sprint(i)
			obj, err = cm, c.Update(ctx, cm)
		}
		took := time.Since(start)
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err):
			// The churn process got there first: a lost race, not a read.
			res.conflicts++
			continue
		case err != nil:
			t.Fatalf("round %d: %s %s/%s: %v", i, verb, r.ns, name, err)
		}
		res.latencies = append(res.latencies, took)
		res.reads++
		if why := r.staleness(verb, widget, obj); why != "" {
			res.stale++
			if res.first == "" {
				res.first = fmt.Sprintf("round %d, %s of %s %s: %s", i, verb, kindName(widget), name, why)
			}
		}
	}
	return res
}

// staleness reads obj's key through the lister and says how the read is
// stale, or "" when it reflects the write.
func (r *ryowRun) staleness(verb string, widget bool, obj client.Object) string {
	var got client.Object
	var err error
	if widget {
		got, err = r.ws.Get(obj.GetNamespace(), obj.GetName())
	} else {
		got, err = r.cms.Get(obj.GetNamespace(), obj.GetName())
	}
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err.Error()
	}
	if verb == "delete" {
		if found && got.GetUID() == obj.GetUID() {
			return fmt.Sprintf("the deleted object (uid %s) is still listed at resourceVersion %s", obj.GetUID(), got.GetResourceVersion())
		}
		return ""
	}
	if !found {
		// Deleted by nobody but this test, which does not delete between
		// a write and its read: the write is not in the cache yet.
		return fmt.Sprintf("not listed; written at resourceVersion %s", obj.GetResourceVersion())
	}
	if cmp, err := resourceversion.CompareResourceVersion(got.GetResourceVersion(), obj.GetResourceVersion()); err != nil || cmp < 0 {
		return fmt.Sprintf("listed at resourceVersion %s, written at %s", got.GetResourceVersion(), obj.GetResourceVersion())
	}
	return ""
}

func kindName(widget bool) string {
	if widget {
		return "Widget"
	}
	return "ConfigMap"
}

// writeKubeconfig writes a kubeconfig for c into a temporary file.
func writeKubeconfig(t testing.TB, c *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startChurnProcess starts the churn process and returns a function that
// stops it and returns how many patches it made.
func startChurnProcess(t *testing.T, c churnConfig) (stop func() int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "churn.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), churnEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	// The first line says the churn has begun.
	if !lines.Scan() || lines.Text() != "churning" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the churn process did not start: %q", lines.Text())
	}
	stopped := false
	var total int
	stop = func() int {
		if stopped {
			return total
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		for lines.Scan() {
			fmt.Sscanf(lines.Text(), "patches %d", &total)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("churn process: %v", err)
		}
		return total
	}
	t.Cleanup(func() { stop() })
	return stop
}

// churnMain is the churn process: until SIGTERM it patches the ConfigMaps
// and Widgets of the config's names, one at a time, as fast as the API
// server answers (spec, data and status, never resourceVersion-locked),
// then prints how many patches succeeded. It returns the exit code.
func churnMain(path string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "churn process:", err)
		return 2
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fail(err)
	}
	var c churnConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fail(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fail(err)
	}
	rc.QPS, rc.Burst = -1, 0 // no client-side limit: as fast as the server answers
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail(err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	fmt.Println("churning")
	rng := rand.New(rand.NewPCG(3, 4))
	widgets := dc.Resource(widgetGVR).Namespace(c.Namespace)
	n := 0
	for i := 0; ctx.Err() == nil; i++ {
		name := c.Names[rng.IntN(len(c.Names))]
		var err error
		switch i % 3 {
		case 0:
			patch := fmt.Sprintf(`{"data":{"churn":"%d"}}`, i)
			_, err = kc.CoreV1().ConfigMaps(c.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "churn"})
		case 1:
			patch := fmt.Sprintf(`{"spec":{"color":"c%d"}}`, i)
			_, err = widgets.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "churn"})
		default:
			patch := fmt.Sprintf(`{"status":{"observedSize":%d}}`, i%1000)
			_, err = widgets.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "churn"}, "status")
		}
		switch {
		case err == nil:
			n++
		case apierrors.IsNotFound(err), ctx.Err() != nil:
		default:
			if !strings.Contains(err.Error(), "context canceled") {
				fmt.Fprintln(os.Stderr, "churn process:", err)
			}
		}
	}
	fmt.Printf("patches %d\n", n)
	return 0
}
