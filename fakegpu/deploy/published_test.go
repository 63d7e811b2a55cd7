package deploy

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gangbench/gangbench/fakegpu"
)

// slice is a ResourceSlice of driver on node's pool, of generation gen, with n devices.
func slice(name, driver, node string, gen int64, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1},
	}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fakegpu.DeviceName(i)})
	}
	return s
}

func TestWaitPublished(t *testing.T) {
	inv := fakegpu.Inventory{Count: 2}
	worker := map[string]string{"role": "worker"}
	ctx := context.Background()

	t.Run("already there", func(t *testing.T) {
		cs := fake.NewClientset(node("w1", -1, worker), node("cp", -1, nil),
			slice("s1", fakegpu.DRADriver, "w1", 1, 2),
			// An older generation of the pool, on its way out, does not count.
			slice("s0", fakegpu.DRADriver, "w1", 0, 2))
		if err := WaitPublished(ctx, cs, "role=worker", inv, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("becomes published", func(t *testing.T) {
		cs := fake.NewClientset(node("w1", -1, worker), node("w2", -1, worker), slice("s1", fakegpu.DRADriver, "w1", 1, 2))
		var once atomic.Bool
		cs.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
			if once.CompareAndSwap(false, true) {
				go func() {
					_, _ = cs.ResourceV1().ResourceSlices().Create(ctx, slice("s2", fakegpu.DRADriver, "w2", 1, 2), metav1.CreateOptions{})
				}()
			}
			return false, nil, nil
		})
		if err := WaitPublished(ctx, cs, "role=worker", inv, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("timeout names nodes", func(t *testing.T) {
		cs := fake.NewClientset(node("w1", -1, worker), node("w2", -1, worker), node("w3", -1, worker),
			slice("s1", fakegpu.DRADriver, "w1", 1, 2), slice("s2", fakegpu.DRADriver, "w2", 1, 1),
			// Another driver's slice is not ours.
			slice("s3", "gpu.example.com", "w3", 1, 2))
		err := WaitPublished(ctx, cs, "role=worker", inv, 1200*time.Millisecond)
		if err == nil {
			t.Fatal("no error")
		}
		for _, w := range []string{"role=worker", "publish 2 devices", "w2 has 1 devices", "w3 has no slice", "2 of 3", "1.2s"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		if strings.Contains(err.Error(), "w1") {
			t.Errorf("error names w1, which publishes all its GPUs: %q", err)
		}
	})

	t.Run("no nodes", func(t *testing.T) {
		err := WaitPublished(ctx, fake.NewClientset(), "", inv, 600*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "no node matched") {
			t.Errorf("err = %v", err)
		}
	})
}
