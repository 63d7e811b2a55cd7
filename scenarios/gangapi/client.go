package gangapi

import (
	"context"
	"fmt"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// convertedPodGroups serves PodGroups of a non-native version through the dynamic client.
type convertedPodGroups struct {
	api API
	ri  dynamic.ResourceInterface
}

func (c *convertedPodGroups) Create(ctx context.Context, pg *schedv1beta1.PodGroup, opts metav1.CreateOptions) (*schedv1beta1.PodGroup, error) {
	u, err := PodGroupToV1alpha2(c.api, pg)
	if err != nil {
		return nil, err
	}
	out, err := c.ri.Create(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	return PodGroupFromV1alpha2(c.api, out)
}

func (c *convertedPodGroups) Get(ctx context.Context, name string, opts metav1.GetOptions) (*schedv1beta1.PodGroup, error) {
	out, err := c.ri.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return PodGroupFromV1alpha2(c.api, out)
}

func (c *convertedPodGroups) List(ctx context.Context, opts metav1.ListOptions) (*schedv1beta1.PodGroupList, error) {
	ul, err := c.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	l := &schedv1beta1.PodGroupList{ListMeta: metav1.ListMeta{
		ResourceVersion: ul.GetResourceVersion(), Continue: ul.GetContinue(), RemainingItemCount: ul.GetRemainingItemCount(),
	}}
	for i := range ul.Items {
		pg, err := PodGroupFromV1alpha2(c.api, &ul.Items[i])
		if err != nil {
			return nil, err
		}
		l.Items = append(l.Items, *pg)
	}
	return l, nil
}

func (c *convertedPodGroups) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := c.ri.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return convertWatch(w, func(u *unstructured.Unstructured) (runtime.Object, error) { return PodGroupFromV1alpha2(c.api, u) }), nil
}

func (c *convertedPodGroups) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.ri.Delete(ctx, name, opts)
}

func (c *convertedPodGroups) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return c.ri.DeleteCollection(ctx, opts, listOpts)
}

func (c *convertedPodGroups) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*schedv1beta1.PodGroup, error) {
	data, err := convertPatch(c.api, "PodGroup", pt, data)
	if err != nil {
		return nil, err
	}
	out, err := c.ri.Patch(ctx, name, pt, data, opts, subresources...)
	if err != nil {
		return nil, err
	}
	return PodGroupFromV1alpha2(c.api, out)
}

// convertedWorkloads serves Workloads of a non-native version through the dynamic client.
type convertedWorkloads struct {
	api API
	ri  dynamic.ResourceInterface
}

func (c *convertedWorkloads) Create(ctx context.Context, w *schedv1beta1.Workload, opts metav1.CreateOptions) (*schedv1beta1.Workload, error) {
	u, err := WorkloadToV1alpha2(c.api, w)
	if err != nil {
		return nil, err
	}
	out, err := c.ri.Create(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	return WorkloadFromV1alpha2(c.api, out)
}

func (c *convertedWorkloads) Get(ctx context.Context, name string, opts metav1.GetOptions) (*schedv1beta1.Workload, error) {
	out, err := c.ri.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return WorkloadFromV1alpha2(c.api, out)
}

func (c *convertedWorkloads) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.ri.Delete(ctx, name, opts)
}

func (c *convertedWorkloads) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*schedv1beta1.Workload, error) {
	data, err := convertPatch(c.api, "Workload", pt, data)
	if err != nil {
		return nil, err
	}
	out, err := c.ri.Patch(ctx, name, pt, data, opts, subresources...)
	if err != nil {
		return nil, err
	}
	return WorkloadFromV1alpha2(c.api, out)
}

// convertPatch converts the partial objects of merge patches; a JSON patch addresses paths that
// differ between the versions and is refused rather than sent wrong.
func convertPatch(api API, kind string, pt types.PatchType, data []byte) ([]byte, error) {
	switch pt {
	case types.MergePatchType, types.StrategicMergePatchType:
		return PatchToV1alpha2(api, kind, data)
	}
	return nil, fmt.Errorf("%w: %s patch of type %s cannot be converted to %s (use a merge patch)", ErrNotExpressible, kind, pt, api)
}

// convertWatch converts every object of a dynamic watch; an object that does not convert becomes an
// Error event (which reflectors and callers treat as a failed watch) rather than being dropped.
func convertWatch(w watch.Interface, conv func(*unstructured.Unstructured) (runtime.Object, error)) watch.Interface {
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		u, ok := e.Object.(*unstructured.Unstructured)
		if !ok || e.Type == watch.Error {
			return e, true
		}
		obj, err := conv(u)
		if err != nil {
			st := apierrors.NewInternalError(err).ErrStatus
			return watch.Event{Type: watch.Error, Object: &st}, true
		}
		return watch.Event{Type: e.Type, Object: obj}, true
	})
}

// PodGroupListWatch lists and watches PodGroups of namespace ns ("" for all) as v1beta1 objects,
// for informers (cache.NewSharedIndexInformer with &schedv1beta1.PodGroup{}).
func (c *Client) PodGroupListWatch(ns string) cache.ListerWatcher {
	pgs := c.PodGroups(ns)
	// The client whose watch-list support decides how the reflector lists: client-go's fakes do
	// not support it, and a reflector that tries anyway waits for a bookmark that never comes.
	var client any = c.typed
	if !c.api.Native() {
		client = c.dyn
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return pgs.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return pgs.Watch(ctx, opts)
		},
	}, client)
}
