package apiservertest

import (
	"encoding/json"
	"os"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

// WriteKubeconfig writes a kubeconfig for Config's admin credentials to path,
// for tools such as kubectl. It is JSON, which every kubeconfig reader accepts.
func (s *Server) WriteKubeconfig(path string) error {
	const name = "apiservertest"
	cfg := clientcmdv1.Config{
		Kind:       "Config",
		APIVersion: "v1",
		Clusters: []clientcmdv1.NamedCluster{{Name: name, Cluster: clientcmdv1.Cluster{
			Server:                   s.host(),
			CertificateAuthorityData: s.creds.caPEM,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: name, AuthInfo: clientcmdv1.AuthInfo{
			Token: s.creds.adminToken,
		}}},
		Contexts: []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{
			Cluster:  name,
			AuthInfo: name,
		}}},
		CurrentContext: name,
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
