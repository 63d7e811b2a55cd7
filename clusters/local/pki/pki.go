// Package pki generates the throwaway certificate authority, serving and client certificates and the
// service-account key pair for a local control plane. Everything is done in-process with crypto/x509 so
// that the harness needs neither openssl nor cfssl on the machine running it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Identity is the subject of a client certificate: CommonName is the Kubernetes user, Organizations its groups.
type Identity struct {
	CommonName    string
	Organizations []string
}

// Options controls what Generate produces.
type Options struct {
	ServingHosts []string            // DNS names and IP literals for the serving cert SANs
	Clients      map[string]Identity // file base name -> identity
	ValidFor     time.Duration       // zero -> 1 year
	Now          func() time.Time    // nil -> time.Now
}

// KeyPair holds the paths of a PEM certificate and its PEM private key.
type KeyPair struct{ CertFile, KeyFile string }

// Bundle holds the paths of every file in a generated PKI directory.
type Bundle struct {
	Dir               string
	CA                KeyPair
	Serving           KeyPair
	Clients           map[string]KeyPair
	ServiceAccountKey string
	ServiceAccountPub string
}

const (
	caName      = "ca"
	servingName = "serving"
	saName      = "sa"

	defaultValidFor = 365 * 24 * time.Hour
	// Components start within seconds of generation, so a small backdate absorbs clock skew
	// without making a stale bundle look fresh.
	backdate = time.Minute
)

// Generate creates dir (mode 0700) and writes a fresh bundle into it, replacing any previous files.
func Generate(dir string, opts Options) (*Bundle, error) {
	if err := validate(dir, opts); err != nil {
		return nil, err
	}
	validFor := opts.ValidFor
	if validFor == 0 {
		validFor = defaultValidFor
	}
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	notBefore, notAfter := now.Add(-backdate), now.Add(validFor)

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: create %s: %w", dir, err)
	}
	// MkdirAll is subject to the umask and leaves an existing directory alone; the keys must not be
	// readable by other users either way.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: chmod %s: %w", dir, err)
	}
	b := newBundle(dir, clientNames(opts.Clients))

	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "gangbench-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
	}
	caCert, caKey, err := issue(b.CA, caTmpl, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("pki: CA: %w", err)
	}

	servingTmpl := leafTemplate(pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, notBefore, notAfter)
	for _, h := range opts.ServingHosts {
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			servingTmpl.IPAddresses = append(servingTmpl.IPAddresses, ip)
		} else {
			servingTmpl.DNSNames = append(servingTmpl.DNSNames, h)
		}
	}
	if _, _, err := issue(b.Serving, servingTmpl, caCert, caKey); err != nil {
		return nil, fmt.Errorf("pki: serving certificate: %w", err)
	}

	for name, id := range opts.Clients {
		subject := pkix.Name{CommonName: id.CommonName, Organization: id.Organizations}
		tmpl := leafTemplate(subject, x509.ExtKeyUsageClientAuth, notBefore, notAfter)
		if _, _, err := issue(b.Clients[name], tmpl, caCert, caKey); err != nil {
			return nil, fmt.Errorf("pki: client %q: %w", name, err)
		}
	}

	if err := writeServiceAccountKeys(b); err != nil {
		return nil, fmt.Errorf("pki: service-account keys: %w", err)
	}
	return b, nil
}

// Load returns the bundle in dir after checking that every file, including each named client's, exists.
func Load(dir string, clients []string) (*Bundle, error) {
	if dir == "" {
		return nil, errors.New("pki: empty directory")
	}
	for _, name := range clients {
		if err := validateClientName(name); err != nil {
			return nil, err
		}
	}
	b := newBundle(dir, clients)
	files := []string{b.CA.CertFile, b.CA.KeyFile, b.Serving.CertFile, b.Serving.KeyFile, b.ServiceAccountKey, b.ServiceAccountPub}
	for _, name := range clients {
		files = append(files, b.Clients[name].CertFile, b.Clients[name].KeyFile)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("pki: bundle in %s is missing %s: %w", dir, filepath.Base(f), err)
		}
	}
	return b, nil
}

// CAPEM returns the CA certificate, e.g. for a kubeconfig's certificate-authority-data.
func (b *Bundle) CAPEM() ([]byte, error) {
	data, err := os.ReadFile(b.CA.CertFile)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA certificate: %w", err)
	}
	return data, nil
}

func validate(dir string, opts Options) error {
	if dir == "" {
		return errors.New("pki: empty directory")
	}
	if opts.ValidFor < 0 {
		return fmt.Errorf("pki: negative validity %s", opts.ValidFor)
	}
	// Go clients ignore the CommonName for host verification, so a serving cert without SANs is unusable.
	if len(opts.ServingHosts) == 0 {
		return errors.New("pki: at least one serving host is required")
	}
	for i, h := range opts.ServingHosts {
		if strings.TrimSpace(h) == "" {
			return fmt.Errorf("pki: serving host %d is empty", i)
		}
	}
	for name, id := range opts.Clients {
		if err := validateClientName(name); err != nil {
			return err
		}
		if id.CommonName == "" {
			return fmt.Errorf("pki: client %q has an empty CommonName", name)
		}
	}
	return nil
}

func validateClientName(name string) error {
	switch {
	case name == "":
		return errors.New("pki: empty client name")
	case strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, filepath.Separator):
		return fmt.Errorf("pki: client name %q contains a path separator", name)
	case name == "." || name == "..":
		return fmt.Errorf("pki: client name %q is not a file name", name)
	// These would overwrite the CA, serving or service-account files.
	case name == caName || name == servingName || name == saName:
		return fmt.Errorf("pki: client name %q is reserved", name)
	}
	return nil
}

func clientNames(m map[string]Identity) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func newBundle(dir string, clients []string) *Bundle {
	pair := func(name string) KeyPair {
		return KeyPair{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	}
	b := &Bundle{
		Dir:               dir,
		CA:                pair(caName),
		Serving:           pair(servingName),
		Clients:           make(map[string]KeyPair, len(clients)),
		ServiceAccountKey: filepath.Join(dir, saName+".key"),
		ServiceAccountPub: filepath.Join(dir, saName+".pub"),
	}
	for _, name := range clients {
		b.Clients[name] = pair(name)
	}
	return b
}

func leafTemplate(subject pkix.Name, usage x509.ExtKeyUsage, notBefore, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:               subject,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
	}
}

// issue creates a key, signs tmpl with parent/parentKey (self-signs when parent is nil) and writes both.
func issue(kp KeyPair, tmpl, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	// RFC 5280 wants unique positive serials; 128 random bits make collisions across regenerations moot.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial: %w", err)
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse certificate: %w", err)
	}
	if err := writeKey(kp.KeyFile, key); err != nil {
		return nil, nil, err
	}
	if err := writePEM(kp.CertFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func writeServiceAccountKeys(b *Bundle) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("marshal public key: %w", err)
	}
	if err := writeKey(b.ServiceAccountKey, key); err != nil {
		return err
	}
	return writePEM(b.ServiceAccountPub, "PUBLIC KEY", pub, 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal private key: %w", err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM writes through a temporary file and a rename so that a component restarted mid-generation
// never reads a truncated file, and so that a key is never briefly world-readable.
func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
