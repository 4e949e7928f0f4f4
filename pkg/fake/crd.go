package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// objectMeta is the name of ObjectMeta's type in client-go's models, which
// a custom resource's metadata refers to, as kube-apiserver's.
const objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// CRDTypeConverter returns the schema server-side apply merges custom
// resources by, for Options.TypeConverter, read from their
// CustomResourceDefinitions as kube-apiserver reads it: each version's
// openAPIV3Schema, with metadata as the built-in ObjectMeta (owner
// references keyed by uid, finalizers a set) and apiVersion and kind as
// strings, here and in every x-kubernetes-embedded-resource. Lists merge
// as their x-kubernetes-list-type says, atomic when it says nothing;
// objects with properties are structs, objects with additionalProperties
// maps merged key by key.
//
// Each manifest is YAML or JSON, and may hold several documents (a CRD
// file as controller-gen writes it, or a kustomize build); each document
// must be an apiextensions.k8s.io/v1 CustomResourceDefinition. A kind that
// none of them defines gets the schema deduced from the object, as with
// no TypeConverter.
func CRDTypeConverter(manifests ...[]byte) (managedfields.TypeConverter, error) {
	models := map[string]*spec.Schema{}
	kinds := map[schema.GroupVersionKind]string{}
	for i, m := range manifests {
		d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(m), 4096)
		for doc := 1; ; doc++ {
			var raw json.RawMessage
			err := d.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			where := fmt.Sprintf("manifest %d, document %d", i+1, doc)
			if err != nil {
				return nil, fmt.Errorf("fake: CRDTypeConverter: %s: %w", where, err)
			}
			if len(raw) == 0 || string(raw) == "null" {
				continue // an empty document, as between two ---
			}
			if err := addCRD(models, kinds, raw); err != nil {
				return nil, fmt.Errorf("fake: CRDTypeConverter: %s: %w", where, err)
			}
		}
	}
	if len(kinds) == 0 {
		return nil, errors.New("fake: CRDTypeConverter: the manifests hold no CustomResourceDefinition: pass the bytes of the CRD files")
	}
	crdSchema, err := schemaconv.ToSchemaFromOpenAPI(models, false)
	if err != nil {
		return nil, fmt.Errorf("fake: CRDTypeConverter: converting the CRDs' schemas: %w", err)
	}
	// The custom types refer to ObjectMeta and what it holds: they come
	// from client-go's models, as kube-apiserver merges its own.
	tv, err := builtinTypes().ObjectToTyped(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}})
	if err != nil {
		return nil, fmt.Errorf("fake: CRDTypeConverter: reading client-go's models: %w", err)
	}
	types := slices.Clone(crdSchema.Types)
	for _, t := range tv.Schema().Types {
		if _, ok := crdSchema.FindNamedType(t.Name); !ok {
			types = append(types, t)
		}
	}
	parser := &typed.Parser{Schema: smdschema.Schema{Types: types}}
	c := crdTypes{types: map[schema.GroupVersionKind]typed.ParseableType{}}
	for gvk, name := range kinds {
		c.types[gvk] = parser.Type(name)
	}
	return c, nil
}

// addCRD adds the schema of each version of the CRD in raw (JSON) to
// models, named as kube-apiserver names them, and indexes the names by
// kind.
func addCRD(models map[string]*spec.Schema, kinds map[schema.GroupVersionKind]string, raw []byte) error {
	var crd struct {
		APIVersion string
		Kind       string
		Metadata   struct{ Name string }
		Spec       struct {
			Group    string
			Names    struct{ Kind string }
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema *spec.Schema `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &crd); err != nil {
		return err
	}
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		return fmt.Errorf("%s %s is not an apiextensions.k8s.io/v1 CustomResourceDefinition", crd.APIVersion, crd.Kind)
	}
	s := crd.Spec
	if s.Group == "" || s.Names.Kind == "" || len(s.Versions) == 0 {
		return fmt.Errorf("CustomResourceDefinition %q needs spec.group, spec.names.kind and spec.versions", crd.Metadata.Name)
	}
	// The models' names are the group reversed, as in Go's packages:
	// io.ctrlkit.example.v1.Widget for example.ctrlkit.io/v1.
	labels := strings.Split(s.Group, ".")
	slices.Reverse(labels)
	for _, v := range s.Versions {
		model := v.Schema.OpenAPIV3Schema
		if model == nil {
			return fmt.Errorf("CustomResourceDefinition %s: version %q has no schema.openAPIV3Schema", crd.Metadata.Name, v.Name)
		}
		addTypeMeta(model)
		addEmbedded(model)
		name := strings.Join(labels, ".") + "." + v.Name + "." + s.Names.Kind
		models[name] = model
		kinds[schema.GroupVersionKind{Group: s.Group, Version: v.Name, Kind: s.Names.Kind}] = name
	}
	return nil
}

// addTypeMeta gives s kube-apiserver's apiVersion, kind and metadata.
func addTypeMeta(s *spec.Schema) {
	s.SetProperty("apiVersion", *spec.StringProperty())
	s.SetProperty("kind", *spec.StringProperty())
	s.SetProperty("metadata", *spec.RefSchema("#/components/schemas/" + objectMeta))
}

// addEmbedded gives every x-kubernetes-embedded-resource under s its
// apiVersion, kind and metadata.
func addEmbedded(s *spec.Schema) {
	if s == nil {
		return
	}
	for k, p := range s.Properties {
		addEmbedded(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		addEmbedded(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		addEmbedded(s.AdditionalProperties.Schema)
	}
	if embedded, _ := s.Extensions.GetBool("x-kubernetes-embedded-resource"); embedded {
		addTypeMeta(s)
	}
}

// crdTypes is CRDTypeConverter's: the types of the kinds the CRDs
// define, and the deduced type for any other.
type crdTypes struct {
	types map[schema.GroupVersionKind]typed.ParseableType
}

func (c crdTypes) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	t, ok := c.types[obj.GetObjectKind().GroupVersionKind()]
	if !ok {
		t = typed.DeducedParseableType
	}
	if u, ok := obj.(runtime.Unstructured); ok {
		return t.FromUnstructured(u.UnstructuredContent(), opts...)
	}
	return t.FromStructured(obj, opts...)
}

func (crdTypes) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	m, ok := v.AsValue().Unstructured().(map[string]any)
	if !ok {
		return nil, fmt.Errorf("fake: a typed value of %T is not an object", v.AsValue().Unstructured())
	}
	return &unstructured.Unstructured{Object: m}, nil
}
