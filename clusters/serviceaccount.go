package clusters

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/internal/poll"
)

// WaitDefaultServiceAccount waits until the controller-manager's service-account controller has
// made the namespace's "default" ServiceAccount. Until then the apiserver's ServiceAccount
// admission refuses every pod of the namespace ("serviceaccount \"default\" not found"): a new
// cluster's first pods and a new namespace's first pods both race it, and a harness that loses
// that race must not blame the scheduler under test (it once failed FLT-10 on a loaded machine).
func WaitDefaultServiceAccount(ctx context.Context, cs kubernetes.Interface, ns string, timeout time.Duration) error {
	return poll.Until(ctx, fmt.Sprintf("ServiceAccount default in namespace %s (made by the controller-manager's serviceaccount controller; pods are refused until it exists)", ns),
		100*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "not created yet", nil
			}
			return err == nil, "present", err
		})
}
