package envtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crd is one CustomResourceDefinition to install, with where it was read.
type crd struct {
	obj    *unstructured.Unstructured
	source string
}

// readCRDs reads the CRDs of paths: files, or the manifests directly in
// directories.
func readCRDs(paths []string) ([]crd, error) {
	var crds []crd
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("envtest: CRDDirectoryPaths: %w", err)
		}
		files := []string{p}
		if info.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("envtest: CRDDirectoryPaths: %w", err)
			}
			files = nil
			for _, e := range entries {
				if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") && e.Name() != "kustomization.yaml" {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
		for _, f := range files {
			read, err := readFile(f)
			if err != nil {
				return nil, err
			}
			crds = append(crds, read...)
		}
	}
	return crds, nil
}

func readFile(file string) ([]crd, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("envtest: CRDDirectoryPaths: %w", err)
	}
	var crds []crd
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envtest: %s: %w", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetAPIVersion() != "apiextensions.k8s.io/v1" || u.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("envtest: %s holds %s %s %q, not an apiextensions.k8s.io/v1 CustomResourceDefinition: CRDDirectoryPaths takes CRD manifests only", file, u.GetAPIVersion(), u.GetKind(), u.GetName())
		}
		crds = append(crds, crd{obj: u, source: file})
	}
}

// installCRDs creates the CRDs and waits until each is established and
// discovery lists each served version's resource.
func installCRDs(ctx context.Context, cfg *rest.Config, crds []crd) error {
	if len(crds) == 0 {
		return nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("envtest: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("envtest: %w", err)
	}
	client := dyn.Resource(crdResource)
	for _, c := range crds {
		if _, err := client.Create(ctx, c.obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("envtest: creating CustomResourceDefinition %q of %s: %w", c.obj.GetName(), c.source, err)
		}
	}
	for _, c := range crds {
		name := c.obj.GetName()
		served := func(ctx context.Context) (bool, error) {
			got, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("reading CustomResourceDefinition %q: %w", name, err)
			}
			if !established(got) {
				return false, nil
			}
			group, _, _ := unstructured.NestedString(got.Object, "spec", "group")
			plural, _, _ := unstructured.NestedString(got.Object, "spec", "names", "plural")
			versions, _, _ := unstructured.NestedSlice(got.Object, "spec", "versions")
			for _, v := range versions {
				v, _ := v.(map[string]any)
				if s, _ := v["served"].(bool); !s {
					continue
				}
				version, _ := v["name"].(string)
				list, err := disc.ServerResourcesForGroupVersion(group + "/" + version)
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				if err != nil {
					return false, fmt.Errorf("discovery of %s/%s: %w", group, version, err)
				}
				if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
					return false, nil
				}
			}
			return true, nil
		}
		if err := waitFor(ctx, nil, "CustomResourceDefinition "+name+" to be served", served); err != nil {
			return err
		}
	}
	return nil
}

// established reports whether crd's Established condition is True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		c, _ := c.(map[string]any)
		if c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
}
