package local

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/client-go/tools/clientcmd"
)

// The token file is read by the apiserver's own parser, and each kubeconfig's token authenticates as
// the identity's user with its groups: RBAC must see the same users as with certificates.
func TestTokenFileAuthenticatesEachIdentity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.csv")
	ids := identities()
	tokens, err := writeTokenFile(path, ids)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v %v", fi, err)
	}
	auth, err := tokenfile.NewCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for name, id := range ids {
		tok := tokens[name]
		if len(tok) != 64 || seen[tok] {
			t.Fatalf("%s: token %q is short or shared", name, tok)
		}
		seen[tok] = true
		kc := filepath.Join(dir, "kubeconfig-"+name)
		if err := writeKubeconfig(kc, "https://127.0.0.1:1", "ctx", ca, name, tok); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.BearerToken != tok || cfg.CertData != nil {
			t.Errorf("%s: kubeconfig carries token %q and a certificate %v; want the token alone", name, cfg.BearerToken, cfg.CertData != nil)
		}
		resp, ok, err := auth.AuthenticateToken(t.Context(), cfg.BearerToken)
		if err != nil || !ok {
			t.Fatalf("%s: token not accepted: %v", name, err)
		}
		if u := resp.User; u.GetName() != id.CommonName || len(u.GetGroups()) != len(id.Organizations) ||
			(len(id.Organizations) > 0 && u.GetGroups()[0] != id.Organizations[0]) {
			t.Errorf("%s authenticates as %q %v, want %q %v", name, u.GetName(), u.GetGroups(), id.CommonName, id.Organizations)
		}
	}
	if _, ok, _ := auth.AuthenticateToken(t.Context(), "0000"); ok {
		t.Error("an unknown token was accepted")
	}
}
