package broker_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

// pki is a throwaway CA with a server and a client certificate, as PEM files.
type pki struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "formica test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{caFile: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	tc, err := broker.ServerTLS(p.serverCert, p.serverKey, "")
	if err != nil {
		t.Fatal(err)
	}
	s := brokertest.Start(t, brokertest.WithTLS(tc), brokertest.WithoutJetStream())
	url := []string{s.ClientURL()}

	nc, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: url, CAFile: p.caFile})
	if err != nil {
		t.Fatalf("TLS connect: %v", err)
	}
	defer nc.Close()
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Fatalf("connection is not TLS: %v", err)
	}
	// In-process clients skip TLS.
	local, err := s.Connect("local")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	roundTrip(t, nc, local, "formica.tls")

	// Without our CA the server's certificate must not verify.
	if bad, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: url}); err == nil {
		bad.Close()
		t.Fatal("connected without trusting the test CA")
	}
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	tc, err := broker.ServerTLS(p.serverCert, p.serverKey, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	s := brokertest.Start(t, brokertest.WithTLS(tc), brokertest.WithoutJetStream())
	url := []string{s.ClientURL()}

	nc, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{
		URLs: url, CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey,
	})
	if err != nil {
		t.Fatalf("mutual TLS connect: %v", err)
	}
	nc.Close()

	if bad, err := broker.Connect(ctxT(t, 10*time.Second), broker.ClientConfig{URLs: url, CAFile: p.caFile}); err == nil {
		bad.Close()
		t.Fatal("connected without a client certificate")
	}
}
