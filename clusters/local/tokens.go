package local

import (
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/gangbench/gangbench/clusters/local/pki"
)

// The components and the harness authenticate with bearer tokens from the apiserver's
// --token-auth-file, not with client certificates: the apiserver verifies a client certificate's
// chain on every request (an ECDSA signature check), and under load that was 6 % of its CPU in a
// profile of a measured window, while a token is a map lookup. The users and groups are the same as
// the certificates would carry, so RBAC judges every request as before. Only the admin keeps a
// client certificate, for the metrics and profile endpoints of the apiserver and the scheduler.

// writeTokenFile gives each identity a fresh random token and writes them in the apiserver's token
// file format (token, user, uid, "group,group"), mode 0600. It returns the tokens by identity name.
func writeTokenFile(path string, ids map[string]pki.Identity) (map[string]string, error) {
	tokens := map[string]string{}
	var records [][]string
	for _, name := range slices.Sorted(maps.Keys(ids)) {
		id := ids[name]
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("token for %s: %w", name, err)
		}
		tok := hex.EncodeToString(b)
		tokens[name] = tok
		rec := []string{tok, id.CommonName, id.CommonName}
		if len(id.Organizations) > 0 {
			rec = append(rec, strings.Join(id.Organizations, ","))
		}
		records = append(records, rec)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(records); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return tokens, nil
}
