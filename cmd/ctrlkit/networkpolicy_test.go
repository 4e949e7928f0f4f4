package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// networkPolicy is what the tests read of a NetworkPolicy.
type networkPolicy struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
	Spec     struct {
		PodSelector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"podSelector"`
		PolicyTypes []string `json:"policyTypes"`
		Ingress     []struct {
			From  []map[string]any
			Ports []struct {
				Port     int32
				Protocol string
			}
		}
	}
}

// TestNewNetworkPolicies checks config/network-policy for each
// combination of --webhook and --network-policy: written and deployed by
// config/default unless --network-policy=false, each policy selects the
// Deployment's pods by their labels, restricts ingress only, and opens one
// port of the manager container: metrics to namespaces labelled
// metrics=enabled, webhook (with --webhook) to any address. The generated
// config_test.go checks the policies of a project in more depth;
// TestNewProjectE2E runs it.
func TestNewNetworkPolicies(t *testing.T) {
	for _, webhook := range []bool{false, true} {
		for _, policies := range []bool{true, false} {
			t.Run(fmt.Sprintf("webhook=%v/network-policy=%v", webhook, policies), func(t *testing.T) {
				args := slices.Clone(guestbook)
				if webhook {
					args = append(args, "--webhook")
				}
				args = append(args, fmt.Sprintf("--network-policy=%v", policies))
				dir := filepath.Join(t.TempDir(), "op")
				if code, _, stderr := ctrlkitNew(append(args, dir)...); code != 0 {
					t.Fatalf("status %d; stderr:\n%s", code, stderr)
				}
				checkNetworkPolicies(t, dir, webhook, policies)
			})
		}
	}
}

func checkNetworkPolicies(t *testing.T, dir string, webhook, policies bool) {
	t.Helper()
	var deployed struct{ Resources []string }
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(dir, "config", "default", "kustomization.yaml")), &deployed); err != nil {
		t.Fatal(err)
	}
	files := listFiles(t, filepath.Join(dir, "config", "network-policy"))
	readme := string(mustRead(t, filepath.Join(dir, "README.md")))
	configTest := string(mustRead(t, filepath.Join(dir, "config_test.go")))
	if !policies {
		if len(files) > 0 || slices.Contains(deployed.Resources, "../network-policy") {
			t.Errorf("--network-policy=false: config/network-policy holds %v, config/default deploys %v; want neither", files, deployed.Resources)
		}
		if !strings.Contains(readme, "`ctrlkit new --network-policy=false`") {
			t.Error("README.md does not say the project was written without NetworkPolicies")
		}
		if strings.Contains(configTest, "func TestNetworkPolicies") {
			t.Error("config_test.go tests NetworkPolicies the project does not have")
		}
		return
	}

	want := []string{"kustomization.yaml", "metrics.yaml"}
	if webhook {
		want = append(want, "webhook.yaml")
	}
	if !slices.Equal(files, want) {
		t.Errorf("config/network-policy holds %v, want %v", files, want)
	}
	if !slices.Contains(deployed.Resources, "../network-policy") {
		t.Errorf("config/default deploys %v, not ../network-policy", deployed.Resources)
	}
	var listed struct{ Resources []string }
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(dir, "config", "network-policy", "kustomization.yaml")), &listed); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(listed.Resources, want[1:]) {
		t.Errorf("config/network-policy/kustomization.yaml lists %v, want %v", listed.Resources, want[1:])
	}
	if !strings.Contains(configTest, "func TestNetworkPoliciesOpenOnlyTheOperatorsPorts(t *testing.T) {") {
		t.Error("config_test.go does not test the NetworkPolicies")
	}
	if !strings.Contains(readme, "metrics=enabled") || !strings.Contains(readme, "--network-policy=false") {
		t.Error("README.md does not say which namespaces may scrape, or how to go without the NetworkPolicies")
	}

	pod := deploymentManager(t, filepath.Join(dir, "config", "manager", "manager.yaml"))
	podLabels, ports := pod.labels, pod.ports
	for _, f := range want[1:] {
		var np networkPolicy
		if err := yaml.Unmarshal(mustRead(t, filepath.Join(dir, "config", "network-policy", f)), &np); err != nil {
			t.Fatal(err)
		}
		if np.Kind != "NetworkPolicy" || !maps.Equal(np.Spec.PodSelector.MatchLabels, podLabels) || len(podLabels) == 0 {
			t.Errorf("%s: a %s selecting %v, want a NetworkPolicy selecting the Deployment's pods %v", f, np.Kind, np.Spec.PodSelector.MatchLabels, podLabels)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []string{"Ingress"}) {
			t.Errorf("%s: policyTypes %v, want [Ingress]: the operator must reach the API server", f, np.Spec.PolicyTypes)
		}
		port := strings.TrimSuffix(f, ".yaml") // the container port of the same name
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 ||
			np.Spec.Ingress[0].Ports[0].Port != ports[port] || ports[port] == 0 || np.Spec.Ingress[0].Ports[0].Protocol != "TCP" {
			t.Fatalf("%s: ingress %+v, want one rule for the manager container's port %s (%d/TCP)", f, np.Spec.Ingress, port, ports[port])
		}
		var wantFrom []map[string]any // webhook: any address, as no policy can name the API server
		if port == "metrics" {
			wantFrom = []map[string]any{{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"metrics": "enabled"}}}}
		}
		if from := np.Spec.Ingress[0].From; !reflect.DeepEqual(from, wantFrom) {
			t.Errorf("%s: ingress from %v, want %v", f, from, wantFrom)
		}
	}
}

// managerPod is what the Deployment in config/manager/manager.yaml says
// of its pods: their labels, and its manager container's ports (by name)
// and args.
type managerPod struct {
	labels map[string]string
	ports  map[string]int32
	args   []string
}

// deploymentManager reads the managerPod of the Deployment in file.
func deploymentManager(t *testing.T, file string) managerPod {
	t.Helper()
	for _, doc := range documents(mustRead(t, file)) {
		var d struct {
			Kind string
			Spec struct {
				Template struct {
					Metadata struct{ Labels map[string]string }
					Spec     struct {
						Containers []struct {
							Name  string
							Args  []string
							Ports []struct {
								Name          string
								ContainerPort int32 `json:"containerPort"`
							}
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		m := managerPod{labels: d.Spec.Template.Metadata.Labels, ports: map[string]int32{}}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				m.args = c.Args
				for _, p := range c.Ports {
					m.ports[p.Name] = p.ContainerPort
				}
			}
		}
		return m
	}
	t.Fatalf("%s has no Deployment", file)
	return managerPod{}
}
