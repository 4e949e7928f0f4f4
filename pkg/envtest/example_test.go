package envtest_test

import (
	"context"
	"fmt"
	"log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/envtest"
)

// An e2e suite starts one control plane in TestMain, with the operator's
// CRDs, and stops it when the tests are done. (Not run by go test: it
// needs the binaries; TestEnvironment runs the same steps.)
func Example() {
	env := &envtest.Environment{CRDDirectoryPaths: []string{"config/crd"}}
	cfg, err := env.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			log.Print(err)
		}
	}()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ns, err := kube.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ns.Name)
}
