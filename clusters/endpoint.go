package clusters

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Endpoint is an HTTPS endpoint of a component (e.g. /metrics) plus the credentials that may read it.
type Endpoint struct {
	URL string `json:"url"`
	// CAFile verifies the server; empty means the system roots.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are a client certificate; BearerToken is the alternative.
	CertFile    string `json:"certFile,omitempty"`
	KeyFile     string `json:"keyFile,omitempty"`
	BearerToken string `json:"bearerToken,omitempty"`
	// ServerName overrides the name checked in the server certificate (self-signed component certs
	// are issued for "localhost" while we dial 127.0.0.1).
	ServerName string `json:"serverName,omitempty"`
	// InsecureSkipVerify is for components that serve a self-signed certificate we do not hold the
	// CA of (kube-scheduler generates its own serving certificate when none is given).
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// Transport, when set, replaces the TLS settings above: endpoints reached through a user's
	// kubeconfig (whose credentials may be embedded or come from an exec plugin) use client-go's.
	Transport http.RoundTripper `json:"-"`
	// Timeout bounds a request; 0 means 30 s. A CPU profile answers only after its duration.
	Timeout time.Duration `json:"-"`
}

// HTTPClient returns a client configured with the endpoint's credentials.
func (e Endpoint) HTTPClient() (*http.Client, error) {
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if e.Transport != nil {
		return &http.Client{Transport: e.Transport, Timeout: timeout}, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: e.ServerName, InsecureSkipVerify: e.InsecureSkipVerify} //nolint:gosec // only for self-signed component certs, see field doc
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: read CA: %w", e.URL, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("endpoint %s: CA file %s holds no PEM certificate", e.URL, e.CAFile)
		}
		cfg.RootCAs = pool
	}
	if e.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: client certificate: %w", e.URL, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: timeout}, nil
}

// Get fetches the endpoint and returns the body; a non-200 status is an error that carries the start
// of the body, because that is where the apiserver explains a 403.
func (e Endpoint) Get(ctx context.Context) ([]byte, error) {
	if e.URL == "" {
		return nil, fmt.Errorf("endpoint not available")
	}
	c, err := e.HTTPClient()
	if err != nil {
		return nil, err
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	if err != nil {
		return nil, err
	}
	if e.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+e.BearerToken)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", e.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: read body: %w", e.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		if len(body) > 300 {
			body = body[:300]
		}
		return nil, fmt.Errorf("GET %s: %s: %s", e.URL, resp.Status, body)
	}
	return body, nil
}
