package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var admin = Identity{CommonName: "kubernetes-admin", Organizations: []string{"system:masters"}}

func testOptions(now time.Time) Options {
	return Options{
		ServingHosts: []string{"localhost", "127.0.0.1", "::1"},
		Clients:      map[string]Identity{"admin": admin, "scheduler": {CommonName: "system:kube-scheduler"}},
		Now:          func() time.Time { return now },
	}
}

func generate(t *testing.T, opts Options) *Bundle {
	t.Helper()
	b, err := Generate(filepath.Join(t.TempDir(), "pki"), opts)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return b
}

func readPEM(t *testing.T, path, wantType string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != wantType {
		t.Fatalf("%s: want a %q PEM block", path, wantType)
	}
	return block.Bytes
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(readPEM(t, path, "CERTIFICATE"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func TestChainVerifies(t *testing.T) {
	now := time.Now()
	b := generate(t, testOptions(now))
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, b.CA.CertFile))

	tests := []struct {
		name, cert, host string
		usage            x509.ExtKeyUsage
		ok               bool
	}{
		{"serving localhost", b.Serving.CertFile, "localhost", x509.ExtKeyUsageServerAuth, true},
		{"serving ipv4", b.Serving.CertFile, "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"serving ipv6", b.Serving.CertFile, "::1", x509.ExtKeyUsageServerAuth, true},
		{"serving wrong host", b.Serving.CertFile, "example.com", x509.ExtKeyUsageServerAuth, false},
		{"serving as client", b.Serving.CertFile, "", x509.ExtKeyUsageClientAuth, false},
		{"admin as client", b.Clients["admin"].CertFile, "", x509.ExtKeyUsageClientAuth, true},
		{"admin as server", b.Clients["admin"].CertFile, "", x509.ExtKeyUsageServerAuth, false},
		{"scheduler as client", b.Clients["scheduler"].CertFile, "", x509.ExtKeyUsageClientAuth, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readCert(t, tc.cert).Verify(x509.VerifyOptions{
				Roots: pool, DNSName: tc.host, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{tc.usage},
			})
			if (err == nil) != tc.ok {
				t.Fatalf("Verify error = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCertificateContents(t *testing.T) {
	b := generate(t, testOptions(time.Now()))

	ca := readCert(t, b.CA.CertFile)
	if !ca.IsCA || ca.Subject.CommonName != "gangbench-ca" || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v CN=%q KeyUsage=%v", ca.IsCA, ca.Subject.CommonName, ca.KeyUsage)
	}
	serving := readCert(t, b.Serving.CertFile)
	if serving.IsCA || serving.Subject.CommonName != "kube-apiserver" {
		t.Errorf("serving: IsCA=%v CN=%q", serving.IsCA, serving.Subject.CommonName)
	}
	if !slices.Equal(serving.DNSNames, []string{"localhost"}) {
		t.Errorf("serving DNSNames = %v", serving.DNSNames)
	}
	if len(serving.IPAddresses) != 2 || !serving.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !serving.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Errorf("serving IPAddresses = %v", serving.IPAddresses)
	}
	if serving.SerialNumber.BitLen() < 64 || serving.SerialNumber.Cmp(ca.SerialNumber) == 0 {
		t.Errorf("serials not random enough: serving %v, CA %v", serving.SerialNumber, ca.SerialNumber)
	}
	client := readCert(t, b.Clients["admin"].CertFile)
	if client.Subject.CommonName != admin.CommonName || !slices.Equal(client.Subject.Organization, admin.Organizations) {
		t.Errorf("admin subject = %v", client.Subject)
	}
	// LoadX509KeyPair checks that each PKCS8 key matches its certificate, which is what the components do.
	for name, kp := range map[string]KeyPair{"ca": b.CA, "serving": b.Serving, "admin": b.Clients["admin"]} {
		readPEM(t, kp.KeyFile, "PRIVATE KEY")
		if _, err := tls.LoadX509KeyPair(kp.CertFile, kp.KeyFile); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Generate(dir, testOptions(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		dir: 0o700, b.CA.KeyFile: 0o600, b.Serving.KeyFile: 0o600, b.Clients["admin"].KeyFile: 0o600,
		b.ServiceAccountKey: 0o600, b.CA.CertFile: 0o644, b.Serving.CertFile: 0o644, b.ServiceAccountPub: 0o644,
	}
	for path, mode := range want {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", filepath.Base(path), fi.Mode().Perm(), mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("leftover temporary file %s", e.Name())
		}
	}
}

func TestServiceAccountKeyPairMatches(t *testing.T) {
	b := generate(t, testOptions(time.Now()))
	priv, err := x509.ParsePKCS8PrivateKey(readPEM(t, b.ServiceAccountKey, "PRIVATE KEY"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(readPEM(t, b.ServiceAccountPub, "PUBLIC KEY"))
	if err != nil {
		t.Fatal(err)
	}
	ecPriv, ok := priv.(*ecdsa.PrivateKey)
	if !ok || ecPriv.Curve != elliptic.P256() {
		t.Fatalf("sa.key is %T, want an ECDSA P-256 key", priv)
	}
	if !ecPriv.PublicKey.Equal(pub) {
		t.Fatal("sa.pub does not hold the public half of sa.key")
	}
}

func TestInjectedClock(t *testing.T) {
	now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		validFor, want time.Duration
	}{{0, 365 * 24 * time.Hour}, {2 * time.Hour, 2 * time.Hour}} {
		opts := testOptions(now)
		opts.ValidFor = tc.validFor
		b := generate(t, opts)
		for _, path := range []string{b.CA.CertFile, b.Serving.CertFile, b.Clients["admin"].CertFile} {
			c := readCert(t, path)
			if !c.NotBefore.Equal(now.Add(-time.Minute)) || !c.NotAfter.Equal(now.Add(tc.want)) {
				t.Errorf("ValidFor %v, %s: validity %v..%v", tc.validFor, filepath.Base(path), c.NotBefore, c.NotAfter)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	gen := generate(t, testOptions(time.Now()))
	b, err := Load(gen.Dir, []string{"admin"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if b.Serving != gen.Serving || b.Clients["admin"] != gen.Clients["admin"] || b.ServiceAccountPub != gen.ServiceAccountPub {
		t.Errorf("Load = %+v, Generate = %+v", b, gen)
	}
	if pemData, err := b.CAPEM(); err != nil || !strings.Contains(string(pemData), "BEGIN CERTIFICATE") {
		t.Errorf("CAPEM = %q, %v", pemData, err)
	}
	if _, err := Load(gen.Dir, []string{"kubelet"}); err == nil || !strings.Contains(err.Error(), "kubelet.crt") {
		t.Errorf("Load with unknown client: %v", err)
	}
	if err := os.Remove(gen.Serving.KeyFile); err != nil {
		t.Fatal(err)
	}
	_, err = Load(gen.Dir, nil)
	if err == nil || !strings.Contains(err.Error(), "serving.key") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load with serving.key removed: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name, dir, wantErr string
		mutate             func(*Options)
	}{
		{"empty dir", "", "empty directory", func(*Options) {}},
		{"no hosts", "d", "serving host", func(o *Options) { o.ServingHosts = nil }},
		{"empty host", "d", "serving host 1 is empty", func(o *Options) { o.ServingHosts = []string{"localhost", " "} }},
		{"empty client", "d", "empty client name", func(o *Options) { o.Clients[""] = admin }},
		{"slash", "d", "path separator", func(o *Options) { o.Clients["../admin"] = admin }},
		{"backslash", "d", "path separator", func(o *Options) { o.Clients[`a\b`] = admin }},
		{"dot-dot", "d", "not a file name", func(o *Options) { o.Clients[".."] = admin }},
		{"reserved", "d", "reserved", func(o *Options) { o.Clients["ca"] = admin }},
		{"empty CN", "d", "empty CommonName", func(o *Options) { o.Clients["x"] = Identity{Organizations: []string{"g"}} }},
		{"negative validity", "d", "negative validity", func(o *Options) { o.ValidFor = -time.Hour }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(time.Now())
			tc.mutate(&opts)
			dir := tc.dir
			if dir != "" {
				dir = filepath.Join(t.TempDir(), dir)
			}
			_, err := Generate(dir, opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Generate error = %v, want it to mention %q", err, tc.wantErr)
			}
			if _, statErr := os.Stat(dir); dir != "" && statErr == nil {
				t.Error("Generate created the directory despite invalid input")
			}
		})
	}
}

// TestTLSHandshake checks the bundle the way kube-apiserver uses it: serving cert plus client-cert auth.
func TestTLSHandshake(t *testing.T) {
	b := generate(t, Options{ServingHosts: []string{"localhost", "127.0.0.1"}, Clients: map[string]Identity{"admin": admin}})
	caPEM, err := b.CAPEM()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM not parseable")
	}
	serverCert, err := tls.LoadX509KeyPair(b.Serving.CertFile, b.Serving.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(b.Clients["admin"].CertFile, b.Clients["admin"].KeyFile)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{{"admin client cert", []tls.Certificate{clientCert}, true}, {"no client cert", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
				Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			type result struct {
				state tls.ConnectionState
				err   error
			}
			done := make(chan result, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					done <- result{err: err}
					return
				}
				defer conn.Close()
				tconn := conn.(*tls.Conn)
				_ = tconn.SetDeadline(time.Now().Add(10 * time.Second))
				err = tconn.Handshake()
				done <- result{tconn.ConnectionState(), err}
			}()

			// With TLS 1.3 the client finishes before the server rejects it, so the server's error is the verdict.
			conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, Certificates: tc.certs})
			if err == nil {
				defer conn.Close()
			} else if tc.ok {
				t.Fatalf("client handshake (server identity check): %v", err)
			}
			res := <-done
			if !tc.ok {
				if res.err == nil {
					t.Fatal("server accepted a client without a certificate")
				}
				return
			}
			if res.err != nil {
				t.Fatalf("server handshake: %v", res.err)
			}
			subject := res.state.PeerCertificates[0].Subject
			if subject.CommonName != admin.CommonName || !slices.Equal(subject.Organization, admin.Organizations) {
				t.Fatalf("server saw subject %v, want CN %q O %v", subject, admin.CommonName, admin.Organizations)
			}
		})
	}
}
