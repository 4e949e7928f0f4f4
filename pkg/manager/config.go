package manager

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// GetConfig loads a rest config the way kubectl does: $KUBECONFIG, then
// ~/.kube/config, then the in-cluster service account. When none of them
// yields a usable config, the error names the files it read and what is
// missing in them (no current context, a context naming a cluster that is
// not defined, a file that does not exist).
func GetConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err == nil {
		return cfg, nil
	}
	return nil, fmt.Errorf("manager: no cluster config: %w", explainConfigError(rules, err))
}

// explainConfigError turns clientcmd's error into one that says which
// kubeconfig files were read and what to change in them. clientcmd reports
// most problems as "no configuration has been provided", naming no file.
func explainConfigError(rules *clientcmd.ClientConfigLoadingRules, err error) error {
	files := rules.GetLoadingPrecedence()
	var found []string
	for _, f := range files {
		if _, statErr := os.Stat(f); statErr == nil {
			found = append(found, f)
		}
	}
	if len(found) == 0 {
		where := "~/.kube/config does not exist"
		if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
			where = fmt.Sprintf("KUBECONFIG=%s names no file that exists", env)
		}
		return fmt.Errorf("%s and this process is not in a pod (KUBERNETES_SERVICE_HOST is unset); set KUBECONFIG to a kubeconfig file", where)
	}
	raw, loadErr := rules.Load()
	if loadErr != nil {
		// Already names the file and the parse error.
		return loadErr
	}
	in := "kubeconfig " + strings.Join(found, ", ")
	if raw.CurrentContext == "" {
		if len(raw.Contexts) == 0 {
			return fmt.Errorf("%s defines no contexts; add one with `kubectl config set-context`", in)
		}
		return fmt.Errorf("%s has no current-context; choose one of %v with `kubectl config use-context NAME`", in, sortedKeys(raw.Contexts))
	}
	kctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok {
		return fmt.Errorf("%s: current-context %q is not among its contexts %v", in, raw.CurrentContext, sortedKeys(raw.Contexts))
	}
	if _, ok := raw.Clusters[kctx.Cluster]; !ok {
		return fmt.Errorf("%s: context %q names cluster %q, which is not defined (clusters: %v)", in, raw.CurrentContext, kctx.Cluster, sortedKeys(raw.Clusters))
	}
	if confirmErr := clientcmd.ConfirmUsable(*raw, ""); confirmErr != nil {
		return fmt.Errorf("%s: %w", in, errors.Join(confirmErr, err))
	}
	return fmt.Errorf("%s: %w", in, err)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
