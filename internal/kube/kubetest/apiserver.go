// Package kubetest starts a real kube-apiserver v1.37.2 and etcd on loopback
// for tests of evictd's Kubernetes mode: real informers, the real Eviction
// API with PodDisruptionBudgets, real RBAC. No kubelet, no controllers.
//
// The tests run only when EVICTD_TEST_APISERVER=1 (scripts/test.sh apiserver
// sets it); plain `go test ./...` skips them. When it is set, a server that
// cannot start fails the test. EVICTD_K8S_BIN names the directory holding
// kube-apiserver (scripts/node-bins.sh builds it); etcd is Debian's
// etcd-server, found on PATH.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/internal/kubeclient"
)

// Env switches the tier on.
const Env = "EVICTD_TEST_APISERVER"

// BinEnv names the directory of the Kubernetes binaries.
const BinEnv = "EVICTD_K8S_BIN"

// AdminToken authenticates as a cluster admin (group system:masters).
const AdminToken = "evictd-test-admin"

// User is a static-token user of the test server.
type User struct {
	Token  string
	Name   string
	Groups []string
}

// ServiceAccountUser is the user a ServiceAccount's token authenticates as,
// which RBAC subjects of kind ServiceAccount match.
func ServiceAccountUser(token, namespace, name string) User {
	return User{Token: token, Name: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
}

// Server is a running kube-apiserver and its etcd.
type Server struct {
	URL    string
	Dir    string
	Admin  *rest.Config
	Client kubernetes.Interface
	// API is evictd's own client (internal/kubeclient) as admin, for the
	// code under test; Client, client-go's clientset, sets the scene.
	API *kubeclient.Client

	stopAPIServer  func()
	startAPIServer func() func()
}

// StopAPIServer stops kube-apiserver (etcd keeps running), as an outage in
// the middle of a test.
func (s *Server) StopAPIServer() { s.stopAPIServer() }

// RestartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same port with the same data, and waits until it is ready.
func (s *Server) RestartAPIServer(t testing.TB) {
	t.Helper()
	s.stopAPIServer = s.startAPIServer()
	s.waitReady(t)
}

// Start starts etcd and kube-apiserver (RBAC on, static tokens for the
// admin and users) and stops both when the test ends. It skips unless Env
// is "1", and fails when the servers cannot start.
func Start(t testing.TB, users ...User) *Server {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Skipf("real kube-apiserver tests need %s=1 (scripts/test.sh apiserver)", Env)
	}
	bin := os.Getenv(BinEnv)
	apiserver := filepath.Join(bin, "kube-apiserver")
	if _, err := os.Stat(apiserver); bin == "" || err != nil {
		t.Fatalf("%s=1 but no kube-apiserver in %s=%q (run scripts/node-bins.sh)", Env, BinEnv, bin)
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("%s=1 but etcd is not on PATH (apt-get install etcd-server): %v", Env, err)
	}
	dir := t.TempDir()
	s := &Server{Dir: dir}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	writeFile(t, filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	var tokens strings.Builder
	fmt.Fprintf(&tokens, "%s,admin,admin,\"system:masters\"\n", AdminToken)
	for _, u := range users {
		fmt.Fprintf(&tokens, "%s,%s,%s,\"%s\"\n", u.Token, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	writeFile(t, filepath.Join(dir, "tokens.csv"), []byte(tokens.String()))

	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	_ = start(t, dir, "etcd", etcd, "--name", "test", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL, "--initial-cluster-state", "new")
	waitFor(t, dir, "etcd", 30*time.Second, func() bool {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	s.startAPIServer = func() func() {
		return start(t, dir, "kube-apiserver", apiserver, "--etcd-servers", etcdURL,
			"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
			"--cert-dir", filepath.Join(dir, "certs"), "--endpoint-reconciler-type", "none",
			"--service-cluster-ip-range", "10.96.0.0/24", "--token-auth-file", filepath.Join(dir, "tokens.csv"),
			"--authorization-mode", "RBAC", "--service-account-issuer", "https://kubernetes.default.svc",
			"--service-account-key-file", filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
			"--profiling=false")
	}
	s.stopAPIServer = s.startAPIServer()
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	s.Admin = s.ConfigFor(AdminToken)
	if s.API, err = kubeclient.New(s.Admin); err != nil {
		t.Fatal(err)
	}
	if s.Client, err = kubernetes.NewForConfig(s.Admin); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t)
	return s
}

func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	waitFor(t, s.Dir, "kube-apiserver", 90*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body, err := s.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok"
	})
}

// ConfigFor returns a client configuration that authenticates with token
// (the serving certificate is self-signed: not verified).
func (s *Server) ConfigFor(token string) *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 100, Burst: 200, Timeout: 10 * time.Second}
}

// Namespace creates a namespace and its default ServiceAccount (a bare
// apiserver runs no controller that would; pods cannot be created without it).
func (s *Server) Namespace(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
	if _, err := s.Client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// RunningPod creates pod on node and marks it as the kubelet would after
// admitting and starting it: start time, phase Running, Ready, and a
// running status with a containerd ID for each container.
func (s *Server) RunningPod(t testing.TB, pod *v1.Pod, node string) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod.Spec.NodeName = node
	p, err := s.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	now := metav1.Now()
	p.Status.Phase = v1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}}
	for i, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Ready: true, Image: c.Image, ImageID: c.Image,
			ContainerID: fmt.Sprintf("containerd://%s%02d", strings.ReplaceAll(string(p.UID), "-", ""), i),
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if p, err = s.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking pod %s/%s running: %v", pod.Namespace, pod.Name, err)
	}
	return p
}

// Node creates a Node object named name (no kubelet behind it).
func (s *Server) Node(t testing.TB, name string) {
	t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := s.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// stopGrace is how long a server started here has to exit on SIGTERM
// before it is killed: etcd and the apiserver shut down in well under a
// second on a quiet machine, a few seconds on a loaded one.
const stopGrace = 10 * time.Second

// Terminate stops the process p, whose Wait closes done: SIGTERM, then
// SIGKILL once grace has passed. It returns once p has been waited for.
func Terminate(p *os.Process, done <-chan struct{}, grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.Kill()
		<-done
	}
}

// start runs a server with its output in dir/<name>.log, stopped (SIGTERM,
// then SIGKILL after 10 s) when the test ends or when the returned function
// is called; cleanups run last-in first-out, so the apiserver stops before
// etcd.
func start(t testing.TB, dir, name, path string, args ...string) (stop func()) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			Terminate(cmd.Process, done, stopGrace)
			logf.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t testing.TB, dir, name string, limit time.Duration, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ready() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			t.Fatalf("%s not ready after %s; end of its log:\n%s", name, limit, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Kubeconfig writes a kubeconfig for token into the server's directory and
// returns its path (for kubectl and --kubeconfig).
func (s *Server) Kubeconfig(t testing.TB, name, token string) string {
	t.Helper()
	p := filepath.Join(s.Dir, name+".kubeconfig")
	writeFile(t, p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: %s}}]
current-context: test
`, s.URL, name, token, name)))
	return p
}

// Kubectl runs the kubectl of BinEnv with the admin's kubeconfig.
func (s *Server) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	kc := s.Kubeconfig(t, "admin", AdminToken)
	cmd := exec.Command(filepath.Join(os.Getenv(BinEnv), "kubectl"), append([]string{"--kubeconfig", kc, "--request-timeout", "20s"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
