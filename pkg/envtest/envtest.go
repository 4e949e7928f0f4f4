// Package envtest starts a real control plane for tests: an etcd and a
// kube-apiserver, as processes of the test, on ports of 127.0.0.1 only.
// It needs nothing but client-go, so an operator's e2e tests do not
// require controller-runtime.
//
// The API server runs as a cluster's does, with what an operator's tests
// rely on:
//   - TLS, and clients authenticated by certificate: Start's config is an
//     admin (group system:masters);
//   - RBAC authorization, so a client acting as a ServiceAccount (a token
//     from the TokenRequest API, which the server can sign and check) has
//     only what its Roles grant;
//   - the default admission plugins (Pod Security among them) but
//     ServiceAccount, which would wait for a controller that does not run;
//   - the CRDs of CRDDirectoryPaths, created and served before Start
//     returns.
//
// No controller-manager runs: no Deployment ever makes a Pod, no garbage
// collector deletes dependents, no namespace is ever emptied. The
// binaries come from BinaryAssetsDirectory or KUBEBUILDER_ASSETS, as for
// controller-runtime's envtest: setup-envtest fetches them, and a ctrlkit
// checkout builds them with make envtest.
package envtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Environment is one control plane. Set its fields, then Start it; Stop
// ends its processes and removes their files. An Environment is started
// at most once.
type Environment struct {
	// BinaryAssetsDirectory holds the kube-apiserver and etcd binaries.
	// Empty means the directory in KUBEBUILDER_ASSETS.
	BinaryAssetsDirectory string
	// CRDDirectoryPaths are CRD manifests to install: files, or
	// directories whose .yaml, .yml and .json files are read (not their
	// subdirectories). Each document must be an apiextensions.k8s.io/v1
	// CustomResourceDefinition; a path that does not exist is an error.
	// Start returns once every CRD is established and its versions are
	// served.
	CRDDirectoryPaths []string
	// StartTimeout bounds Start: the processes starting, the API server
	// becoming ready and the CRDs being served. Zero means one minute.
	StartTimeout time.Duration

	mu    sync.Mutex
	dir   string // the processes' files: certificates, keys, etcd's data, their logs
	procs []*process
}

// process is one of the control plane's processes, with the log it writes.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

// Start starts etcd and kube-apiserver, installs the CRDs, and returns an
// admin config of the API server: TLS with a client certificate of the
// group system:masters, QPS 1000 and Burst 2000 (as controller-runtime's
// envtest gives, so a test's clients are not held to client-go's default
// of 5 requests a second). On error every process started is stopped
// again, and the error carries the end of the failing process's log.
func (e *Environment) Start() (*rest.Config, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dir != "" {
		return nil, errors.New("envtest: Start called twice: use a new Environment for a new control plane")
	}
	bin := e.BinaryAssetsDirectory
	if bin == "" {
		bin = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if bin == "" {
		return nil, errors.New("envtest: no binaries: set BinaryAssetsDirectory or KUBEBUILDER_ASSETS to a directory holding kube-apiserver and etcd (setup-envtest use -p path, or make envtest in a ctrlkit checkout)")
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("envtest: %s is not in %s: %w", name, bin, err)
		}
	}
	crds, err := readCRDs(e.CRDDirectoryPaths)
	if err != nil {
		return nil, err
	}
	timeout := e.StartTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if e.dir, err = os.MkdirTemp("", "envtest-"); err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	cfg, err := e.start(ctx, bin, crds)
	if err != nil {
		e.stop()
		return nil, err
	}
	return cfg, nil
}

func (e *Environment) start(ctx context.Context, bin string, crds []crd) (*rest.Config, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	etcd, err := e.run(filepath.Join(bin, "etcd"),
		"--data-dir="+filepath.Join(e.dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return nil, err
	}
	health := func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
	if err := waitFor(ctx, etcd, "etcd to be healthy", health); err != nil {
		return nil, err
	}

	pki, err := writePKI(e.dir)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ports[2])
	apiserver, err := e.run(filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // no kubernetes Service endpoints: 127.0.0.1 is not a routable address
		"--secure-port="+port,
		"--cert-dir="+e.dir,
		"--tls-cert-file="+pki.servingCert,
		"--tls-private-key-file="+pki.servingKey,
		"--client-ca-file="+pki.caCert,
		"--service-account-issuer=https://127.0.0.1:"+port,
		"--service-account-key-file="+pki.serviceAccountKey,
		"--service-account-signing-key-file="+pki.serviceAccountKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
	)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{
		Host:  "https://127.0.0.1:" + port,
		QPS:   1000,
		Burst: 2000,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   pki.caPEM,
			CertData: pki.adminCertPEM,
			KeyData:  pki.adminKeyPEM,
		},
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	ready := func(ctx context.Context) (bool, error) {
		var code int
		kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
		return code == http.StatusOK, nil
	}
	if err := waitFor(ctx, apiserver, "kube-apiserver to be ready", ready); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, cfg, crds); err != nil {
		return nil, err
	}
	return rest.CopyConfig(cfg), nil
}

// Stop ends the API server, then etcd, and removes their files. It may be
// called on an Environment that did not start, and more than once.
func (e *Environment) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stop()
}

// stop is Stop with e.mu held.
func (e *Environment) stop() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		p := e.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("envtest: %s did not exit within 20s of SIGTERM and was killed", p.name))
		}
	}
	e.procs = nil
	if e.dir != "" {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("envtest: %w", err))
		}
	}
	return errors.Join(errs...)
}

// run starts the binary path with args, its output to a log in e.dir.
func (e *Environment) run(path string, args ...string) (*process, error) {
	name := filepath.Base(path)
	p := &process{name: name, log: filepath.Join(e.dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("envtest: starting %s: %w", name, err)
	}
	e.procs = append(e.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// waitFor polls cond until it holds, p (if not nil) exits or ctx ends.
func waitFor(ctx context.Context, p *process, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var exited chan struct{} // nil, never ready, without a process
	if p != nil {
		exited = p.done
	}
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("envtest: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("envtest: %s exited (%v) while waiting for %s; the end of its log:\n%s", p.name, p.err, what, tail(p.log))
		case <-ctx.Done():
			err := fmt.Errorf("envtest: timed out waiting for %s (raise StartTimeout on a loaded machine)", what)
			if p != nil {
				err = fmt.Errorf("%w; the end of %s's log:\n%s", err, p.name, tail(p.log))
			}
			return err
		case <-tick.C:
		}
	}
}

// tail is the last lines of the file at path, at most 2 KiB of them.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// freePorts returns n ports of 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("envtest: finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
