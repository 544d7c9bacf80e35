/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.

Modifications copyright The boltinformer Authors.
*/

// This file follows k8s.io/kubernetes v1.37.2,
// cmd/kube-controller-manager/app/service_accounts.go
// (newServiceAccountTokenController),
// cmd/kube-controller-manager/app/controller_utils.go (controllerLoop) and
// cmd/kube-controller-manager/app/controllermanager.go (readCA), all
// unexported: the
// service account token controller is not among app.NewControllerDescriptors,
// and a ControllerDescriptor cannot be built outside its package, so Run
// builds this controller itself, first, as upstream's BuildControllers does.

package controllermanager

import (
	"context"
	"fmt"
	"os"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

func newServiceAccountTokenController(
	ctx context.Context, controllerContext app.ControllerContext, controllerName string,
	rootClientBuilder clientbuilder.ControllerClientBuilder,
) (app.Controller, error) {
	if len(controllerContext.ComponentConfig.SAController.ServiceAccountKeyFile) == 0 {
		klog.FromContext(ctx).Info("Controller is disabled because there is no private key", "controller", controllerName)
		return nil, nil
	}

	privateKey, err := keyutil.PrivateKeyFromFile(controllerContext.ComponentConfig.SAController.ServiceAccountKeyFile)
	if err != nil {
		return nil, fmt.Errorf("error reading key for service account token controller: %w", err)
	}

	var rootCA []byte
	if controllerContext.ComponentConfig.SAController.RootCAFile != "" {
		if rootCA, err = readCA(controllerContext.ComponentConfig.SAController.RootCAFile); err != nil {
			return nil, fmt.Errorf("error parsing root-ca-file at %s: %w", controllerContext.ComponentConfig.SAController.RootCAFile, err)
		}
	} else {
		config, err := rootClientBuilder.Config("tokens-controller")
		if err != nil {
			return nil, fmt.Errorf("failed to create Kubernetes client config for %q: %w", "tokens-controller", err)
		}
		rootCA = config.CAData
	}

	client, err := rootClientBuilder.Client("tokens-controller")
	if err != nil {
		return nil, fmt.Errorf("failed to create Kubernetes client for %q: %w", "tokens-controller", err)
	}

	tokenGenerator, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, privateKey)
	if err != nil {
		return nil, fmt.Errorf("failed to build token generator: %w", err)
	}
	tokenController, err := serviceaccountcontroller.NewTokensController(
		klog.FromContext(ctx),
		controllerContext.InformerFactory.Core().V1().ServiceAccounts(),
		controllerContext.InformerFactory.Core().V1().Secrets(),
		client,
		serviceaccountcontroller.TokensControllerOptions{
			TokenGenerator: tokenGenerator,
			RootCA:         rootCA,
		},
	)
	if err != nil {
		return nil, fmt.Errorf("error creating Tokens controller: %w", err)
	}

	return &controllerLoop{name: controllerName, run: func(ctx context.Context) {
		tokenController.Run(ctx, int(controllerContext.ComponentConfig.SAController.ConcurrentSATokenSyncs))
	}}, nil
}

// controllerLoop implements the Controller interface. It makes it easy to turn a function into a Controller.
type controllerLoop struct {
	name string
	run  func(ctx context.Context)
}

func (loop *controllerLoop) Name() string {
	return loop.name
}

func (loop *controllerLoop) Run(ctx context.Context) {
	loop.run(ctx)
}

func readCA(file string) ([]byte, error) {
	rootCA, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if _, err := certutil.ParseCertsPEM(rootCA); err != nil {
		return nil, err
	}

	return rootCA, err
}
