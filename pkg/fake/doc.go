// Package fake is an in-memory Kubernetes API server for unit tests of
// Reconcilers: a Cluster answers the REST requests of any client built on
// its Config (client-go's clientsets, dynamic client and discovery,
// ctrlkit's client) through an http.RoundTripper, with no process, port or
// etcd, and Lister, MetadataLister and ResourceLister give informer
// listers that are never behind it.
//
// The recipe:
//
//	c, err := fake.New(fake.Options{
//		Scheme:  scheme, // client-go's types plus yours
//		Objects: []runtime.Object{&v1alpha1.Website{...}},
//	})
//	cl, err := client.New(c.Config(), client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
//	websites, err := fake.Lister[*v1alpha1.Website](c)
//	r := &Reconciler{Client: cl, Websites: websites}
//	_, err = r.Reconcile(ctx, req)
//	var got v1alpha1.Website
//	err = c.Get(types.NamespacedName{Namespace: "ns", Name: "site"}, &got)
//	for _, w := range c.Writes() { ... } // w.Verb, w.Resource, w.Err, w.Object
//
// A Reconciler that reads indexes, or metadata only, or unstructured
// objects, gets the lister of each form with the indexes it declares:
//
//	owned := informer.Indexers(informer.ControllerIndex, informer.IndexByControllerOwner[*metav1.PartialObjectMetadata])
//	secrets, err := fake.MetadataLister[*corev1.Secret](c, owned)
//	widgets, err := fake.ResourceLister(c, widgetsGVR)
//
// Any client built on Config works the same way: client-go's clientsets and
// dynamic client, and a whole manager (manager.New(c.Config(), ...)), whose
// informers list and watch the fake.
//
// # Faithful where it matters
//
// The fake keeps kube-apiserver's rules that a Reconciler depends on, each
// with a test:
//   - Storage: one resourceVersion counter (a decimal string) increases with
//     every write to any resource, as etcd's revision does; a write that
//     changes nothing stores nothing and keeps the resourceVersion. Creates
//     set a random uid, creationTimestamp and generation 1, and honour
//     generateName (prefix and 5 random characters); a create carrying a
//     resourceVersion fails as it does on kube-apiserver.
//     metadata.generation grows when anything but metadata and status
//     changes. Objects are stored as typed Go values, as a client reads
//     them back from JSON (timestamps in whole seconds, empty lists
//     absent), and copied in and out: no caller shares a pointer with the
//     store.
//   - Requests: GET of an object or a list (labelSelector, fieldSelector on
//     metadata.name and metadata.namespace; other field labels are refused
//     with 400), POST, PUT, PATCH, DELETE of an object or a collection,
//     under /api/v1 and /apis/{group}/{version}, namespaced or not. Bodies
//     may be JSON, YAML or, for built-in kinds, protobuf; answers are JSON
//     or protobuf (see Content types), and errors a metav1.Status with
//     kube-apiserver's code and reason, so apierrors' predicates work on
//     the client side. dryRun=All answers as if and stores nothing.
//   - Patches: JSON merge patch, JSON patch, and strategic merge patch for
//     built-in kinds only (a custom kind answers 415, as CRDs do). A
//     resourceVersion in the patched object is a precondition.
//   - Conflicts and existence: an update or patch with a stale
//     resourceVersion, or another uid, is a 409 Conflict; one without a
//     resourceVersion is unconditional. An update of a missing object is a
//     404, never a create; a create of an existing name a 409
//     AlreadyExists, also while the old object is being deleted.
//   - The status subresource, for every kind whose Go struct has a field
//     Status: writes to the object keep the stored status, writes to
//     /status change only the status and never the generation. A create
//     drops .status, as kube-apiserver does for custom resources and most
//     built-in kinds; Options.Objects keep it.
//   - Deletion: uid and resourceVersion preconditions; an object with
//     finalizers is only marked (deletionTimestamp, deletionGracePeriodSeconds
//     0, generation and resourceVersion bumped) and the answer is the
//     object; it goes when an update removes its last finalizer. No new
//     finalizer may be added to an object being deleted (422, as
//     kube-apiserver). Without finalizers the object goes at once, and the
//     answer is kube-apiserver's: a Status Success whose details carry the
//     name, the group, the resource (in the field kind) and the uid; for
//     the built-in kinds whose registry returns the deleted object (Pod,
//     Service, Namespace, ServiceAccount, PersistentVolume[Claim],
//     PodTemplate, ResourceQuota, and storage.k8s.io's and
//     resource.k8s.io's that do), the object as it was deleted. dryRun
//     answers the same.
//   - Watch: events for a resource, namespace and selectors, framed as
//     kube-apiserver frames them (see Content types), from a
//     resourceVersion (replayed from a bounded history,
//     410 Gone beyond it) or with initial ADDED events, and the watch-list
//     protocol client-go's informers use (sendInitialEvents and the
//     k8s.io/initial-events-end bookmark). An object that starts or stops
//     matching a label selector arrives as ADDED or DELETED.
//   - Shard selectors (KEP-5866), with Options.ShardSelector, as
//     kube-apiserver with its feature gate ShardedListAndWatch on: a list,
//     watch or deletecollection with a shardSelector selects only the
//     objects whose uid or namespace (FNV-1a, 64 bits) falls in one of its
//     ranges, beside the label and field selectors, and a list echoes the
//     selector it applied, re-rendered, in metadata.shardInfo. The syntax
//     is shardRange(object.metadata.uid, '0x…', '0x…') (or
//     object.metadata.namespace), each bound in single or double quotes,
//     16 lowercase hex digits or 0x10000000000000000 (2^64) for the
//     exclusive end, joined with ||,
//     all ranges on one field, each start below its end, at most 100,000
//     characters, with any whitespace between the tokens; anything else is
//     a 400 BadRequest saying why. Without the option, as with the gate off,
//     the parameter is ignored and nothing is echoed.
//   - Discovery: /api, /apis and each group version, with every kind of the
//     scheme, its scope, verbs and status subresource, for discovery
//     clients and discovery-backed RESTMappers. RESTMapper gives the same
//     mapping without requests.
//
// # Content types
//
// An answer is encoded in the media type the request's Accept header
// negotiates, chosen as kube-apiserver chooses: clauses by q, the specific
// before wildcards, and the first the fake can answer wins; no Accept
// header means JSON. The encoders are apimachinery's own serializers.
//   - application/json, for every kind: an object, a list, a Status; a
//     watch is one metav1.WatchEvent a line.
//   - application/vnd.kubernetes.protobuf, for the kinds of client-go's
//     kubernetes/scheme (built-in types with a generated protobuf
//     encoding): an object, a list or a Status is "k8s\x00" and a
//     runtime.Unknown; a watch (Content-Type
//     application/vnd.kubernetes.protobuf;stream=watch) is a sequence of
//     frames, each a 4-byte big-endian length and a protobuf
//     metav1.WatchEvent whose object holds the object encoded as above.
//     Custom kinds have no protobuf encoding, as CRDs on kube-apiserver:
//     a request that accepts protobuf and JSON is answered in JSON, one
//     that accepts protobuf only is a 406 Not Acceptable.
//   - Metadata only, as client-go's metadata client asks for it: a clause
//     with as=PartialObjectMetadata or as=PartialObjectMetadataList,
//     g=meta.k8s.io and v=v1, in JSON or protobuf and for any kind,
//     custom ones too. An object (also the answer to a write) is a
//     meta.k8s.io/v1 PartialObjectMetadata, a list a
//     PartialObjectMetadataList, and each watch event's object a
//     PartialObjectMetadata; a Status stays a Status. A list asked for as
//     PartialObjectMetadata, or an object as a PartialObjectMetadataList,
//     is a 406.
//   - Errors: a metav1.Status in JSON or protobuf as the Accept header
//     prefers (clauses asking for metadata only do not count, as on
//     kube-apiserver), whatever the kind; in JSON if it accepts neither.
//     An Accept header that allows no answer at all is a 406 in JSON.
//   - Discovery answers are always JSON.
//
// # Not faithful
//
//   - Server-side apply runs on apimachinery's managedfields.FieldManager,
//     as kube-apiserver's does: managedFields are kept for applies,
//     creates, updates and patches (an Update entry under the
//     fieldManager parameter, or else the user agent up to its first /),
//     an apply of a field another manager owns is a 409 whose causes name
//     the field and manager, and force takes it over. Built-in kinds merge
//     by client-go's OpenAPI models (list merge keys); other kinds by
//     Options.TypeConverter (CRDTypeConverter reads it from CRD
//     manifests), or else a schema deduced from the object, in which
//     every list is atomic. Nothing is defaulted, applied configurations
//     neither, so a merge key the server would default (a port's
//     protocol) must be given, and a write of a field's default value
//     (a Deployment's replicas: 1) changes ownership on the fake only.
//     Nothing is validated: a merge the server would refuse as invalid
//     is stored. Objects are stored as their Go types, so an empty map
//     or list under omitempty is dropped where kube-apiserver keeps it.
//     On /status only spec is reset from ownership, as for custom
//     resources. test/applydiff runs the same sequences of apply, update
//     and patch against the fake and kube-apiserver, and finds no
//     difference outside these.
//   - Owner references are stored but nothing acts on them: no garbage
//     collection, no foreground or orphan deletion (propagationPolicy is
//     accepted and ignored). Namespaces need not exist, and deleting one
//     deletes nothing in it.
//   - No validation, defaulting, admission or version conversion: a kind
//     served at two versions is two separate stores. Graceful deletion
//     (gracePeriodSeconds) is immediate. Lists are not paginated. Only
//     metadata.name and metadata.namespace field selectors work.
//   - Content types: no answer is YAML, CBOR or a Table (an Accept of
//     application/yaml alone is a 406; clauses with as=Table, or for
//     meta.k8s.io/v1beta1, are passed over). A request body is decoded by
//     what it holds (JSON, YAML or protobuf), whatever its Content-Type.
//   - Shard selectors: the fake parses the spelling above, a subset of
//     the CEL kube-apiserver accepts; it refuses parentheses, escapes,
//     raw or triple-quoted strings and comments, which kube-apiserver
//     allows. kube-apiserver (k8s.io/apiserver v0.37) answers a selector
//     it cannot parse with a 500, its parse error not being a Status; the
//     fake answers the 400 BadRequest the error is.
//   - metadata.generation is kept for every kind; kube-apiserver keeps it
//     for custom resources and most workload kinds, but leaves it 0 for
//     built-in kinds such as ConfigMap, Secret and Service.
//
// # Concurrency
//
// A Cluster is safe for concurrent use; one mutex orders every write, so
// Writes, the resourceVersions and the watch events share one order.
// Goroutines: each open watch has one, which writes its events to the
// response body and ends when the request's context ends, the client
// closes the body, timeoutSeconds elapse, or the watcher falls more than
// 100 events behind (its stream ends, and a client-go reflector resumes
// from the last resourceVersion it saw). Writes never wait for a watcher.
package fake
