package local

import (
	"context"
	"fmt"
	"os"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gangbench/gangbench/clusters/local/pki"
)

// identities are the users every local cluster gets, each with a bearer token (tokens.go). The names
// are the Kubernetes users the bootstrap RBAC policy already knows, except kwok, which we bind
// ourselves (bindKwok).
func identities() map[string]pki.Identity {
	return map[string]pki.Identity{
		"admin":              {CommonName: "gangbench-admin", Organizations: []string{"system:masters"}},
		"scheduler":          {CommonName: "system:kube-scheduler"},
		"controller-manager": {CommonName: "system:kube-controller-manager"},
		"kwok":               {CommonName: "gangbench:kwok-controller"},
	}
}

// writeKubeconfig writes a kubeconfig for one user with the CA and the user's token embedded, so the
// file stays usable when copied elsewhere (e.g. a CI artifact).
func writeKubeconfig(path, server, contextName, caFile, user, token string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: user}
	cfg.CurrentContext = contextName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// restConfigFrom loads a kubeconfig. The v1beta1 gang API answers every request with a deprecation
// warning ("deprecated in v1.40+"); client-go would print it for each of thousands of requests, so the
// harness's own clients drop warnings on purpose.
func restConfigFrom(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg, nil
}

// bindKwok grants the kwok controller what it does to simulated nodes and their pods: heartbeat node
// status and leases, move pods to Running, finalize deleted pods, and record events.
func bindKwok(ctx context.Context, cs kubernetes.Interface) error {
	const name = "gangbench:kwok-controller"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gangbench.dev/managed": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"get", "patch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "patch", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gangbench.dev/managed": "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kwok ClusterRole: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kwok ClusterRoleBinding: %w", err)
	}
	return nil
}
