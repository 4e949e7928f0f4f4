package manager

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// GetConfig loads a rest config the way kubectl does: $KUBECONFIG, then
// ~/.kube/config, then the in-cluster service account.
func GetConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("manager: no cluster config (set KUBECONFIG, create ~/.kube/config, or run in a pod): %w", err)
	}
	return cfg, nil
}
