package broker

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// clientTLS builds the client side from PEM files. It loads them eagerly, so
// a bad file fails Connect with its name instead of a handshake error.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool("CAFile", caFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, invalid("CertFile/KeyFile: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// ServerTLS builds a ServerConfig.TLS from PEM files. With clientCAFile set,
// clients must present a certificate signed by it (mutual TLS).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, invalid("server cert/key: %v", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAFile != "" {
		pool, err := loadPool("client CA", clientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

func loadPool(field, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, invalid("%s: %v", field, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, invalid("%s %s: no PEM certificates", field, file)
	}
	return pool, nil
}
