// Command ctrlkit is ctrlkit's command-line tool. Its one command, new,
// writes a complete operator project for one custom resource kind:
//
//	ctrlkit new --module example.com/memcached-operator \
//	    --group cache.example.com --version v1alpha1 --kind Memcached \
//	    [--template minimal|deployment] [--webhook] [--network-policy=false] \
//	    ./memcached-operator
//
// The project builds on ctrlkit and deploys: API types with deepcopy code,
// a CRD, a reconciler (--template minimal reports a Ready condition;
// deployment keeps a Deployment per object), its RBAC from
// +kubebuilder:rbac markers, a main with leader election, secure metrics
// and health probes, a Dockerfile for a static non-root image, config/
// (namespace, ServiceAccount, roles and bindings, Deployment, Services,
// NetworkPolicies unless --network-policy=false, kustomizations), with
// --webhook a validating and a defaulting webhook served with
// certificates the operator keeps itself, unit tests (among them one that
// fails if a role grants more than the operator uses), e2e tests under
// envtest, a Makefile (make test, manifests, docker-build,
// deploy) and a README. Bad input is refused before anything is written.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `ctrlkit is the command-line tool of the ctrlkit operator framework.

Usage:
  ctrlkit new [flags] DIR   write a new operator project into DIR
  ctrlkit version           print the version of ctrlkit
  ctrlkit help              show this help

Run 'ctrlkit new -h' for the flags of new.
`

// run is main without the exit: it returns the process status (0 success,
// 1 failure, 2 bad usage or input).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "new":
		return runNew(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ctrlkit: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// versionLine is what ctrlkit version prints: the release, and whether this
// binary was built from a working tree rather than installed at a release.
func versionLine() string {
	if v := ctrlkitVersion(); v != develVersion {
		return "ctrlkit " + v
	}
	return "ctrlkit " + release + " (built from a working tree; generated projects need --ctrlkit-replace)"
}
