package apiservertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are the files kube-apiserver needs for TLS, service-account
// tokens and static-token authentication, all generated fresh per server.
type credentials struct {
	certFile, keyFile string // serving certificate (self-signed) and its key
	saKeyFile         string // RSA private key; also serves as the public key file
	tokenFile         string // static token file: adminToken in system:masters
	caPEM             []byte // the serving certificate, the clients' only trust root
	adminToken        string
}

// writeCredentials generates credentials into dir.
func writeCredentials(dir string) (*credentials, error) {
	c := &credentials{
		certFile:  filepath.Join(dir, "serving.crt"),
		keyFile:   filepath.Join(dir, "serving.key"),
		saKeyFile: filepath.Join(dir, "service-account.key"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	var err error
	if c.caPEM, err = writeServingCert(c.certFile, c.keyFile); err != nil {
		return nil, err
	}
	// Service-account tokens are signed with RS256, so this key must be RSA.
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.saKeyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	c.adminToken = hex.EncodeToString(tok)
	// Format: token,user,uid,"group,group".
	line := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", c.adminToken)
	if err := os.WriteFile(c.tokenFile, []byte(line), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// writeServingCert writes a self-signed certificate valid for 127.0.0.1 and
// localhost and returns it PEM-encoded. It is its own CA, so a client that
// trusts exactly this certificate verifies the server fully.
func writeServingCert(certFile, keyFile string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "boltinformer-apiservertest"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
