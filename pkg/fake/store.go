package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// The store keeps objects as typed Go values, one map per resource. A
// stored object is never changed in place, and never handed out: every
// read copies it, every write stores a new value. All methods here are
// called with c.mu held.

// create stores obj (the caller's own copy) as a new object in namespace
// ns. With dryRun it returns what it would have stored (without a
// resourceVersion, as kube-apiserver does).
func (c *Cluster) create(r *resource, ns string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	m, _ := meta.Accessor(obj)
	if err := checkNamespace(r, ns, m); err != nil {
		return nil, err
	}
	if m.GetResourceVersion() != "" {
		return nil, apierrors.NewInternalError(errors.New("resourceVersion should not be set on objects to be created"))
	}
	if m.GetName() == "" && m.GetGenerateName() == "" {
		return nil, apierrors.NewInvalid(r.gvk.GroupKind(), "", field.ErrorList{
			field.Required(field.NewPath("metadata", "name"), "name or generateName is required"),
		})
	}
	if r.hasStatus {
		// Create ignores .status, as kube-apiserver does for custom
		// resources with a status subresource and most built-in kinds.
		setStatus(obj, r.new())
	}
	m.SetUID(newUID())
	m.SetCreationTimestamp(now())
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetGeneration(1)
	objs := c.objects[r.gvr]
	if m.GetName() == "" {
		// As kube-apiserver: a few tries, then the last name's conflict.
		for range 8 {
			m.SetName(m.GetGenerateName() + rand.String(5))
			if _, taken := objs[objectKey(ns, m.GetName())]; !taken {
				break
			}
		}
	}
	if _, exists := objs[objectKey(ns, m.GetName())]; exists {
		return nil, apierrors.NewAlreadyExists(r.groupResource(), m.GetName())
	}
	if dryRun {
		return c.normalize(r, obj)
	}
	return c.commit(r, watch.Added, nil, obj)
}

// update replaces the object ns/name with obj (the caller's own copy, as
// sent by PUT or produced by a patch). On the status subresource only
// .status changes; on the main resource everything but .status and the
// system metadata.
func (c *Cluster) update(r *resource, ns, name, sub string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	m, _ := meta.Accessor(obj)
	if err := checkNamespace(r, ns, m); err != nil {
		return nil, err
	}
	if m.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), name))
	}
	old, ok := c.objects[r.gvr][objectKey(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(r.groupResource(), name)
	}
	om, _ := meta.Accessor(old)
	if rv := m.GetResourceVersion(); rv != "" && rv != om.GetResourceVersion() {
		return nil, conflict(r, name)
	}
	if uid := m.GetUID(); uid != "" && uid != om.GetUID() {
		return nil, preconditionFailed(r, name, "UID", string(uid), string(om.GetUID()))
	}
	next := obj
	if sub == "status" {
		// Only .status changes, and the managedFields that record who
		// set it.
		next = old.DeepCopyObject()
		setStatus(next, obj)
		nm, _ := meta.Accessor(next)
		nm.SetManagedFields(m.GetManagedFields())
	} else {
		if om.GetDeletionTimestamp() != nil {
			if extra := sets.New(m.GetFinalizers()...).Difference(sets.New(om.GetFinalizers()...)); extra.Len() > 0 {
				return nil, apierrors.NewInvalid(r.gvk.GroupKind(), name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"),
					fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers %q", sets.List(extra)))})
			}
		}
		m.SetUID(om.GetUID())
		m.SetCreationTimestamp(om.GetCreationTimestamp())
		m.SetDeletionTimestamp(om.GetDeletionTimestamp())
		if om.GetDeletionGracePeriodSeconds() != nil {
			m.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
		}
		m.SetGeneration(om.GetGeneration())
		if r.hasStatus {
			setStatus(next, old.DeepCopyObject())
		}
		if !equalBesidesMetaAndStatus(old, next) {
			m.SetGeneration(om.GetGeneration() + 1)
		}
	}
	nm, _ := meta.Accessor(next)
	nm.SetResourceVersion(om.GetResourceVersion())
	next, err := c.normalize(r, next)
	if err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(next, old) {
		// Nothing changed: like etcd, no write and no new resourceVersion.
		return old.DeepCopyObject(), nil
	}
	if dryRun {
		return next, nil
	}
	out, err := c.commit(r, watch.Modified, old, next)
	if err != nil {
		return nil, err
	}
	if om, _ := meta.Accessor(out); om.GetDeletionTimestamp() != nil && len(om.GetFinalizers()) == 0 {
		// The last finalizer is gone: the deletion completes.
		if _, err := c.commit(r, watch.Deleted, out, out.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// delete deletes the object ns/name, or marks it for deletion if it has
// finalizers. It returns the marked object, or, with gone true, the
// object as it was deleted (as it would have been, with dryRun).
func (c *Cluster) delete(r *resource, ns, name string, opts *metav1.DeleteOptions, dryRun bool) (runtime.Object, bool, error) {
	old, ok := c.objects[r.gvr][objectKey(ns, name)]
	if !ok {
		return nil, false, apierrors.NewNotFound(r.groupResource(), name)
	}
	om, _ := meta.Accessor(old)
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != om.GetUID() {
			return nil, false, preconditionFailed(r, name, "UID", string(*p.UID), string(om.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != om.GetResourceVersion() {
			return nil, false, preconditionFailed(r, name, "ResourceVersion", *p.ResourceVersion, om.GetResourceVersion())
		}
	}
	if len(om.GetFinalizers()) > 0 {
		if om.GetDeletionTimestamp() != nil {
			return old.DeepCopyObject(), false, nil
		}
		next := old.DeepCopyObject()
		nm, _ := meta.Accessor(next)
		if nm.GetGeneration() > 0 {
			nm.SetGeneration(nm.GetGeneration() + 1)
		}
		ts := now()
		nm.SetDeletionTimestamp(&ts)
		nm.SetDeletionGracePeriodSeconds(new(int64))
		var err error
		if dryRun {
			next, err = c.normalize(r, next)
		} else {
			next, err = c.commit(r, watch.Modified, old, next)
		}
		return next, false, err
	}
	if dryRun {
		return old.DeepCopyObject(), true, nil
	}
	obj, err := c.commit(r, watch.Deleted, old, old.DeepCopyObject())
	return obj, true, err
}

// list returns copies of the objects of r in namespace ns (all namespaces
// if empty) that match the selectors, in namespace/name order.
func (c *Cluster) list(r *resource, ns string, sel selectors) []runtime.Object {
	objs := c.objects[r.gvr]
	keys := make([]string, 0, len(objs))
	for k, obj := range objs {
		if sel.matches(obj, ns) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]runtime.Object, len(keys))
	for i, k := range keys {
		out[i] = objs[k].DeepCopyObject()
	}
	return out
}

// commit stores obj (or removes it, for watch.Deleted) under a new
// resourceVersion, then brings listers and watchers up to date. It
// returns a copy of what it stored.
func (c *Cluster) commit(r *resource, typ watch.EventType, old, obj runtime.Object) (runtime.Object, error) {
	stored, err := c.normalize(r, obj)
	if err != nil {
		return nil, err
	}
	c.rv++
	m, _ := meta.Accessor(stored)
	m.SetResourceVersion(strconv.FormatUint(c.rv, 10))
	key := objectKey(m.GetNamespace(), m.GetName())
	objs := c.objects[r.gvr]
	if objs == nil {
		objs = map[string]runtime.Object{}
		c.objects[r.gvr] = objs
	}
	if typ == watch.Deleted {
		delete(objs, key)
	} else {
		objs[key] = stored
	}
	c.updateListers(r, stored, typ == watch.Deleted)
	c.notify(event{typ: typ, res: r, obj: stored, old: old, rv: c.rv})
	return stored.DeepCopyObject(), nil
}

// normalize returns obj as a client would read it back: encoded as JSON
// and decoded again, so the store holds exactly what the wire carries
// (timestamps in seconds, empty lists as nil), with no TypeMeta.
func (c *Cluster) normalize(r *resource, obj runtime.Object) (runtime.Object, error) {
	data, err := c.encode(r, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, _, err := c.decoder.Decode(data, &r.gvk, r.new())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return out, nil
}

// encode returns obj as JSON with its apiVersion and kind set, leaving
// obj unchanged.
func (c *Cluster) encode(r *resource, obj runtime.Object) ([]byte, error) {
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	return json.Marshal(obj)
}

// selectors are the selectors of a list, watch or deletecollection; a
// nil one selects everything.
type selectors struct {
	label labels.Selector
	field fields.Selector
	shard sharding.Selector // only with Options.ShardSelector
}

// matches reports whether obj is in namespace ns (any if empty) and
// matches the selectors.
func (sel selectors) matches(obj runtime.Object, ns string) bool {
	m, _ := meta.Accessor(obj)
	if ns != "" && m.GetNamespace() != ns {
		return false
	}
	if sel.label != nil && !sel.label.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if sel.shard != nil {
		// The parser admits the fields Matches can resolve, one per selector.
		if ok, err := sel.shard.Matches(obj); err != nil || !ok {
			return false
		}
	}
	return sel.field == nil || sel.field.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
}

// selectorsOf checks the selectors of a list, watch or deletecollection
// and returns them.
func (c *Cluster) selectorsOf(opts *metainternalversion.ListOptions) (selectors, error) {
	if err := checkFieldSelector(opts.FieldSelector); err != nil {
		return selectors{}, err
	}
	shard, err := c.shardSelector(opts)
	if err != nil {
		return selectors{}, err
	}
	return selectors{label: opts.LabelSelector, field: opts.FieldSelector, shard: shard}, nil
}

// checkFieldSelector refuses the field labels the fake cannot evaluate.
func checkFieldSelector(fs fields.Selector) error {
	if fs == nil {
		return nil
	}
	for _, req := range fs.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s (the fake supports metadata.name and metadata.namespace)", req.Field))
		}
	}
	return nil
}

// checkNamespace sets an empty namespace to the one in the URL and
// refuses another, as kube-apiserver does; cluster-scoped objects lose
// theirs.
func checkNamespace(r *resource, ns string, m metav1.Object) error {
	switch {
	case !r.namespaced:
		m.SetNamespace("")
	case m.GetNamespace() == "":
		m.SetNamespace(ns)
	case m.GetNamespace() != ns:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// setStatus copies the field Status of src into dst, both pointers to
// the same struct type with such a field.
func setStatus(dst, src runtime.Object) {
	reflect.ValueOf(dst).Elem().FieldByName("Status").Set(reflect.ValueOf(src).Elem().FieldByName("Status"))
}

// equalBesidesMetaAndStatus reports whether a and b differ only in
// TypeMeta, ObjectMeta and Status, the rule for leaving metadata.generation
// alone.
func equalBesidesMetaAndStatus(a, b runtime.Object) bool {
	strip := func(obj runtime.Object) any {
		v := reflect.ValueOf(obj.DeepCopyObject()).Elem()
		for _, name := range []string{"TypeMeta", "ObjectMeta", "Status"} {
			if f := v.FieldByName(name); f.IsValid() && f.CanSet() {
				f.SetZero()
			}
		}
		return v.Interface()
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

func conflict(r *resource, name string) error {
	return apierrors.NewConflict(r.groupResource(), name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// preconditionFailed is kube-apiserver's conflict for a uid or
// resourceVersion precondition that does not hold.
func preconditionFailed(r *resource, name, field, want, got string) error {
	return apierrors.NewConflict(r.groupResource(), name,
		fmt.Errorf("precondition failed: %s in precondition: %v, %s in object meta: %v", field, want, field, got))
}

func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func newUID() types.UID { return uuid.NewUUID() }

// now is the time to stamp on objects, in whole seconds as the wire
// carries it.
func now() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }
