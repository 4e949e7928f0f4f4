package manager_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// TestGetConfigExplains checks that each way a kubeconfig can be unusable
// gives an error naming the file and the thing to fix, instead of
// clientcmd's "no configuration has been provided".
func TestGetConfigExplains(t *testing.T) {
	dir := t.TempDir()
	const user = "users:\n- name: u\n  user: {token: abc}\n"
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"no file", "", []string{"names no file that exists", "not in a pod"}},
		{"no contexts", "apiVersion: v1\nkind: Config\n", []string{"defines no contexts"}},
		{"no current context", "apiVersion: v1\nkind: Config\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n" + user,
			[]string{"has no current-context", "[a]", "kubectl config use-context"}},
		{"unknown context", "apiVersion: v1\nkind: Config\ncurrent-context: b\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n" + user,
			[]string{`current-context "b" is not among its contexts [a]`}},
		{"undefined cluster", "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {cluster: nope, user: u}\n" + user,
			[]string{`context "a" names cluster "nope", which is not defined`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".kubeconfig")
			if tc.content != "" {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("KUBECONFIG", path)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			c, err := manager.GetConfig()
			if err == nil {
				t.Fatalf("GetConfig returned a config for host %q, want an error", c.Host)
			}
			msg := err.Error()
			for _, w := range append(tc.want, "no cluster config", path) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "KUBERNETES_MASTER") {
				t.Errorf("error %q still gives clientcmd's misleading advice", msg)
			}
		})
	}
}

// TestGetConfigLoadsAUsableKubeconfig is the positive control.
func TestGetConfigLoadsAUsableKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ok.kubeconfig")
	content := "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:6443}\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: abc}\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	c, err := manager.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != "https://127.0.0.1:6443" || c.BearerToken != "abc" {
		t.Fatalf("got host %q token %q", c.Host, c.BearerToken)
	}
}
