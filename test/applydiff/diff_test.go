package applydiff

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

var seedFlag = flag.Int64("seed", 0, "seed of the random sequences; 0 picks one from the clock")

const namespace = "applydiff"

var (
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// kinds are the apiVersion and kind of each resource the sequences use.
var kinds = map[schema.GroupVersionResource][2]string{
	configMaps:  {"v1", "ConfigMap"},
	deployments: {"apps/v1", "Deployment"},
	gadgetGVR:   {gadgetGV.String(), "Gadget"},
}

// step is one request. Op is apply, applyStatus, update (a read, Body
// merged onto the object as a JSON merge patch, and a PUT), merge,
// strategic or json (a PATCH of that type with Body).
type step struct {
	Op      string
	Manager string
	Force   bool
	Body    string
}

// sequence is a series of steps on one object.
type sequence struct {
	Name  string
	GVR   schema.GroupVersionResource
	Steps []step
}

// outcome is what one step produced, normalized for comparison.
type outcome struct {
	Code    int // 0 on success
	Reason  metav1.StatusReason
	Causes  []string // of a conflict: "field: message", sorted
	Message string   // of a conflict
	// Object is the object read after the step: without resourceVersion,
	// uid, creationTimestamp, generation and managedFields' times, its
	// managedFields sorted by manager, operation and subresource. For
	// Deployments, whose fields kube-apiserver defaults and the fake does
	// not, only the fields some manager owns.
	Object map[string]any
}

func TestApplyDiff(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	seqs := append(handWritten(), randomSequences(seed, 40)...)

	scheme, err := fakeScheme()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile("testdata/gadgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := fake.CRDTypeConverter(crd)
	if err != nil {
		t.Fatal(err)
	}
	c, err := fake.New(fake.Options{Scheme: scheme, TypeConverter: tc})
	if err != nil {
		t.Fatal(err)
	}
	fakeDyn := dynamicFor(t, c.Config())
	realDyn := dynamicFor(t, realCfg)
	kube, err := kubernetes.NewForConfig(realCfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	differences, steps, invalid := 0, 0, 0
	for i, seq := range seqs {
		name := fmt.Sprintf("s%03d", i)
		fakeOut := run(t, fakeDyn, seq, name)
		realOut := run(t, realDyn, seq, name)
		for j := range seq.Steps {
			f, r := fakeOut[j], realOut[j]
			if r.Code == http.StatusUnprocessableEntity && f.Code != r.Code {
				// kube-apiserver refused the step as invalid; the fake
				// does not validate (see its doc), so from here on the
				// two objects differ by design.
				invalid++
				break
			}
			steps++
			if seq.GVR == deployments {
				owned := ownedFields(r.Object)
				f.Object, r.Object = owned.filter(f.Object), owned.filter(r.Object)
			}
			if !reflect.DeepEqual(f, r) {
				differences++
				t.Errorf("%s (%s) step %d %+v:\nfake: %s\nreal: %s", seq.Name, name, j, seq.Steps[j], show(f), show(r))
			}
		}
	}
	t.Logf("%d sequences (%d hand-written), %d steps compared, %d differences; %d sequences compared up to a step kube-apiserver refused as invalid", len(seqs), len(handWritten()), steps, differences, invalid)
}

func dynamicFor(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "applydiff/v1"
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// run carries out seq on the object name and returns each step's outcome.
func run(t *testing.T, d dynamic.Interface, seq sequence, name string) []outcome {
	t.Helper()
	ctx := t.Context()
	rc := d.Resource(seq.GVR).Namespace(namespace)
	out := make([]outcome, len(seq.Steps))
	for i, s := range seq.Steps {
		var err error
		switch s.Op {
		case "apply", "applyStatus":
			u := &unstructured.Unstructured{}
			if err = json.Unmarshal([]byte(s.Body), &u.Object); err != nil {
				t.Fatalf("%s step %d: %v", seq.Name, i, err)
			}
			u.SetAPIVersion(kinds[seq.GVR][0])
			u.SetKind(kinds[seq.GVR][1])
			u.SetName(name)
			opts := metav1.ApplyOptions{FieldManager: s.Manager, Force: s.Force}
			if s.Op == "apply" {
				_, err = rc.Apply(ctx, name, u, opts)
			} else {
				_, err = rc.ApplyStatus(ctx, name, u, opts)
			}
		case "update":
			var cur *unstructured.Unstructured
			if cur, err = rc.Get(ctx, name, metav1.GetOptions{}); err == nil {
				// The update sends the object read with the step's body
				// merged into it (RFC 7386).
				doc, jerr := json.Marshal(cur.Object)
				if jerr == nil {
					doc, jerr = jsonpatch.MergePatch(doc, []byte(s.Body))
				}
				if jerr != nil {
					t.Fatalf("%s step %d: %v", seq.Name, i, jerr)
				}
				if err := cur.UnmarshalJSON(doc); err != nil {
					t.Fatalf("%s step %d: %v", seq.Name, i, err)
				}
				_, err = rc.Update(ctx, cur, metav1.UpdateOptions{FieldManager: s.Manager})
			}
		case "merge", "strategic", "json":
			pt := map[string]types.PatchType{"merge": types.MergePatchType, "strategic": types.StrategicMergePatchType, "json": types.JSONPatchType}[s.Op]
			_, err = rc.Patch(ctx, name, pt, []byte(s.Body), metav1.PatchOptions{FieldManager: s.Manager})
		default:
			t.Fatalf("%s step %d: unknown op %q", seq.Name, i, s.Op)
		}
		out[i] = outcomeOf(err)
		got, gerr := rc.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
		case gerr != nil:
			t.Fatalf("%s step %d: reading the object back: %v", seq.Name, i, gerr)
		default:
			out[i].Object = normalize(got.Object)
		}
	}
	return out
}

func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{}
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		return outcome{Code: -1, Message: err.Error()}
	}
	s := status.Status()
	o := outcome{Code: int(s.Code), Reason: s.Reason}
	if s.Reason == metav1.StatusReasonConflict && s.Details != nil && len(s.Details.Causes) > 0 {
		o.Message = s.Message
		for _, c := range s.Details.Causes {
			o.Causes = append(o.Causes, c.Field+": "+c.Message)
		}
		slices.Sort(o.Causes)
	}
	return o
}

// normalize drops what differs by design between two servers.
func normalize(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "generation"} {
		delete(md, k)
	}
	mf, _ := md["managedFields"].([]any)
	for _, e := range mf {
		delete(e.(map[string]any), "time")
	}
	slices.SortFunc(mf, func(a, b any) int {
		key := func(e any) string {
			m := e.(map[string]any)
			return fmt.Sprint(m["manager"], "\x00", m["operation"], "\x00", m["subresource"])
		}
		return strings.Compare(key(a), key(b))
	})
	return obj
}

func show(o outcome) string {
	b, _ := json.Marshal(o)
	return string(b)
}
