// Package kubeclient is evictd's Kubernetes API client: client-go's REST
// client and informer machinery over a scheme of the four API groups evictd
// calls (core/v1, policy/v1 for the Eviction subresource, and
// authentication/v1 and authorization/v1 for the secure metrics endpoint's
// TokenReview and SubjectAccessReview), with a typed method for each call
// the agent makes.
//
// Why not client-go's kubernetes.Clientset: every one of its typed clients,
// even k8s.io/client-go/kubernetes/typed/core/v1 alone, imports
// k8s.io/client-go/kubernetes/scheme, whose init registers all of
// Kubernetes' ~60 API group versions. That keeps their generated code and
// type data in the binary and touches it at every start: a program that
// only imports the clientset is 23.9 MB stripped and 19.0 MiB resident
// before main runs, against 9.9 MB and 10.2 MiB for one importing what this
// package does (client-go's rest, tools/cache and tools/clientcmd, the four
// groups' types, apimachinery's serializers), measured on this project's
// machine on 2026-12-02. The agent runs on every node, so that is memory
// taken from every node's pods (docs/kubernetes.md#cost).
//
// The retries and the rate limits are client-go's, as a Clientset built from
// the same rest.Config has them: the config's QPS and burst, one HTTP
// transport shared by the groups' clients. The wire format is protobuf, as
// the kubelet's and kube-proxy's for the built-in types (JSON where the
// server answers only that, or where the config asks for a content type):
// decoding the informer's pods from JSON goes through reflection, whose
// per-type field caches (0.47 MiB) and garbage the agent's heap carried;
// with protobuf an agent beside 30 pods had 0.5 MiB less anonymous memory
// (2026-12-06, the v1 node, side by side).
package kubeclient

import (
	"context"
	"fmt"
	"io"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Scheme holds the types of the groups this client calls, and Codecs their
// serializers (no conversion: the server speaks these versions).
var (
	Scheme         = runtime.NewScheme()
	Codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, policyv1.AddToScheme, authnv1.AddToScheme, authzv1.AddToScheme} {
		if err := add(Scheme); err != nil {
			panic(err) // generated registrations of fixed types: cannot fail
		}
	}
	// ListOptions, DeleteOptions, Status and WatchEvent in every version
	// the client sends or reads them in, as client-go's scheme has them.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
}

// Client calls the API server for evictd. Its zero value is not usable: New.
type Client struct {
	core, authn, authz *rest.RESTClient
}

// New builds the client from cfg (not changed), as kubernetes.NewForConfig
// would build the groups' clients.
func New(cfg *rest.Config) (*Client, error) {
	if cfg == nil {
		return nil, fmt.Errorf("kubeclient: no rest config")
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	c := &Client{}
	for _, g := range []struct {
		dst  **rest.RESTClient
		path string
		gv   schema.GroupVersion
	}{
		{&c.core, "/api", v1.SchemeGroupVersion},
		{&c.authn, "/apis", authnv1.SchemeGroupVersion},
		{&c.authz, "/apis", authzv1.SchemeGroupVersion},
	} {
		gc := rest.CopyConfig(cfg)
		gv := g.gv
		gc.GroupVersion, gc.APIPath = &gv, g.path
		gc.NegotiatedSerializer = Codecs.WithoutConversion()
		if gc.ContentType == "" {
			gc.ContentType = runtime.ContentTypeProtobuf
			gc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		}
		if gc.UserAgent == "" {
			gc.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		if *g.dst, err = rest.RESTClientForConfigAndClient(gc, hc); err != nil {
			return nil, fmt.Errorf("kubeclient: %s client: %w", gv, err)
		}
	}
	return c, nil
}

// Core is the core/v1 REST client, for the calls that need a request of
// their own (the Eviction subresource without retries, a node's proxy).
func (c *Client) Core() *rest.RESTClient { return c.core }

// GetNode reads a node.
func (c *Client) GetNode(ctx context.Context, name string) (*v1.Node, error) {
	out := &v1.Node{}
	return out, c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(out)
}

// ListNodes lists the nodes opts selects.
func (c *Client) ListNodes(ctx context.Context, opts metav1.ListOptions) (*v1.NodeList, error) {
	out := &v1.NodeList{}
	return out, c.core.Get().Resource("nodes").VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

// GetPod reads a pod.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*v1.Pod, error) {
	out := &v1.Pod{}
	return out, c.core.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(out)
}

// ListPods lists the pods of a namespace ("": all) that opts selects.
func (c *Client) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*v1.PodList, error) {
	out := &v1.PodList{}
	return out, c.core.Get().Namespace(namespace).Resource("pods").VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

// WatchPods watches the pods of a namespace ("": all) that opts selects.
func (c *Client) WatchPods(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.core.Get().Namespace(namespace).Resource("pods").VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// CreatePod creates a pod in its namespace.
func (c *Client) CreatePod(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	out := &v1.Pod{}
	return out, c.core.Post().Namespace(pod.Namespace).Resource("pods").Body(pod).Do(ctx).Into(out)
}

// DeletePod deletes a pod.
func (c *Client) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.core.Delete().Namespace(namespace).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

// PatchPodStatus patches a pod's status subresource.
func (c *Client) PatchPodStatus(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) (*v1.Pod, error) {
	out := &v1.Pod{}
	return out, c.core.Patch(pt).Namespace(namespace).Resource("pods").Name(name).SubResource("status").Body(data).Do(ctx).Into(out)
}

// PodLogs streams a pod's log.
func (c *Client) PodLogs(ctx context.Context, namespace, name string, opts *v1.PodLogOptions) (io.ReadCloser, error) {
	return c.core.Get().Namespace(namespace).Resource("pods").Name(name).SubResource("log").
		VersionedParams(opts, parameterCodec).Stream(ctx)
}

// CreateEvent creates an Event in its namespace.
func (c *Client) CreateEvent(ctx context.Context, ev *v1.Event) (*v1.Event, error) {
	out := &v1.Event{}
	return out, c.core.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Into(out)
}

// CreateTokenReview asks the API server who a bearer token belongs to.
func (c *Client) CreateTokenReview(ctx context.Context, r *authnv1.TokenReview) (*authnv1.TokenReview, error) {
	out := &authnv1.TokenReview{}
	return out, c.authn.Post().Resource("tokenreviews").Body(r).Do(ctx).Into(out)
}

// CreateSubjectAccessReview asks the API server whether a user may do something.
func (c *Client) CreateSubjectAccessReview(ctx context.Context, r *authzv1.SubjectAccessReview) (*authzv1.SubjectAccessReview, error) {
	out := &authzv1.SubjectAccessReview{}
	return out, c.authz.Post().Resource("subjectaccessreviews").Body(r).Do(ctx).Into(out)
}

// PodListWatch lists and watches the pods that selector selects, in every
// namespace, for an informer.
func (c *Client) PodListWatch(selector fields.Selector) *cache.ListWatch {
	return cache.NewListWatchFromClient(c.core, "pods", metav1.NamespaceAll, selector)
}
