package clusters

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWaitDefaultServiceAccount: pods are created only once the namespace's default ServiceAccount
// exists (a suite lane's, a new local cluster's), and a controller that never makes it is reported
// by name, bounded.
func TestWaitDefaultServiceAccount(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	// The service-account controller makes it on the third look.
	gets := 0
	cs.PrependReactor("get", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if gets++; gets == 3 {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "gb-lane-1"}}
			if err := cs.Tracker().Add(sa); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	if err := WaitDefaultServiceAccount(ctx, cs, "gb-lane-1", 10*time.Second); err != nil {
		t.Fatalf("made on the third look: %v", err)
	}
	if gets < 3 {
		t.Errorf("returned after %d looks, before the ServiceAccount existed", gets)
	}

	err := WaitDefaultServiceAccount(ctx, fake.NewClientset(), "gb-lane-2", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "ServiceAccount default in namespace gb-lane-2") || !strings.Contains(err.Error(), "not created yet") {
		t.Errorf("never made: %v", err)
	}
}
