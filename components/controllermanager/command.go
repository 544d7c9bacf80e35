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
// cmd/kube-controller-manager/app/controllermanager.go:
// NewControllerManagerCommand, Run, createClientBuilders and
// leaderElectAndRun. Run builds the controller context, so it is the one
// place the informer factories can be chosen; it is copied with these
// changes:
//   - a --boltinformer-cache-file flag; the file is opened before the
//     controllers are built and closed after the informers have stopped;
//   - the controller context comes from createControllerContext (context.go),
//     whose factories keep their informers in that file;
//   - the service account token controller is built by this package
//     (satoken.go), first, as upstream's BuildControllers builds it;
//   - leader migration (--enable-leader-migration) is refused with an error:
//     it wraps an unexported field of the token controller's descriptor.
// Everything else (options, configuration, the controllers, BuildControllers,
// RunControllers) is upstream's, called through its exported API.

package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/blang/semver/v4"
	"github.com/spf13/cobra"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/statusz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/component-base/term"
	utilversion "k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	zpagesfeatures "k8s.io/component-base/zpages/features"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/pkg/clientbuilder"
	cmfeatures "k8s.io/controller-manager/pkg/features"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/controller-manager/pkg/leadermigration"
	"k8s.io/klog/v2"
	configv1alpha1 "k8s.io/kube-controller-manager/config/v1alpha1"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	configv1alpha1conversion "k8s.io/kubernetes/pkg/controller/apis/config/v1alpha1"
	kubefeatures "k8s.io/kubernetes/pkg/features"

	"github.com/boltinformer/boltinformer/components/cachefile"
)

const (
	// kubeControllerManager defines variable used internally when referring to cloud-controller-manager component
	kubeControllerManager = "kube-controller-manager"
)

// NewControllerManagerCommand is kube-controller-manager's command
// (app.NewControllerManagerCommand) with every informer kept in the cache
// file --boltinformer-cache-file names.
func NewControllerManagerCommand() *cobra.Command {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		klog.Background().Error(err, "Unable to initialize command options")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	var cacheFile cachefile.Flag

	cmd := &cobra.Command{
		Use: kubeControllerManager,
		Long: `The Kubernetes controller manager (kube-controller-manager v1.37.2) with its
informers kept in a boltinformer cache file (--boltinformer-cache-file): a
restart resumes each informer's watch from the file instead of listing the
cluster again. Everything else is the upstream controller manager.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// silence client-go warnings.
			// kube-controller-manager generically watches APIs (including deprecated ones),
			// and CI ensures it works properly against matching kube-apiserver versions.
			restclient.SetDefaultWarningHandler(restclient.NoWarnings{})
			// makes sure feature gates are set before RunE.
			return s.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			verflag.PrintAndExitIfRequested()

			// Activate logging as soon as possible, after that
			// show flags with the final logging configuration.
			if err := logsapi.ValidateAndApply(s.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())

			// We use context.Background() here still because using server.SetupSignalContext() would cause
			// components like the event broadcaster to terminate on signal immediately, which is not what we want.
			// Termination for that case is being handled explicitly in Run() later on.
			ctx := context.Background()
			c, err := s.Config(ctx, app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases())
			if err != nil {
				return err
			}

			// add feature enablement metrics
			fg := s.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
			fg.(featuregate.MutableFeatureGate).AddMetrics()
			// add component version metrics
			s.ComponentGlobalsRegistry.AddMetrics()

			if utilfeature.DefaultFeatureGate.Enabled(cmfeatures.ControllerManagerReleaseLeaderElectionLockOnExit) {
				ctx = server.SetupSignalContext()
			}
			return Run(ctx, c.Complete(), &cacheFile)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}

	fs := cmd.Flags()
	namedFlagSets := s.Flags(app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases())
	s.ParsedFlags = &namedFlagSets
	verflag.AddFlags(namedFlagSets.FlagSet("global"))
	globalflag.AddGlobalFlags(namedFlagSets.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	cacheFile.AddTo(namedFlagSets.FlagSet("boltinformer"))
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}

	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, namedFlagSets, cols)

	return cmd
}

// Run is app.Run with the controllers' informers kept in the file cacheFile
// names.
func Run(ctx context.Context, c *config.CompletedConfig, cacheFile *cachefile.Flag) error {
	logger := klog.FromContext(ctx)
	stopCh := ctx.Done()

	if leadermigration.Enabled(&c.ComponentConfig.Generic) {
		return errors.New("leader migration (--enable-leader-migration) is not supported with --" + cachefile.FlagName + "; use the upstream kube-controller-manager for the migration")
	}
	db, err := cacheFile.Open()
	if err != nil {
		return err
	}
	// Closed once the informers have stopped (run shuts its factories down
	// before returning), so no commit is cut short.
	defer db.Close()

	// To help debugging, immediately log version
	logger.Info("Starting", "version", utilversion.Get())

	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	// Start events processing pipeline.
	c.EventBroadcaster.StartStructuredLogging(0)
	c.EventBroadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: c.Client.CoreV1().Events("")})
	defer c.EventBroadcaster.Shutdown()

	externalConfig := &configv1alpha1.KubeControllerManagerConfiguration{}
	if err := configv1alpha1conversion.Convert_config_KubeControllerManagerConfiguration_To_v1alpha1_KubeControllerManagerConfiguration(&c.ComponentConfig, externalConfig, nil); err != nil {
		return fmt.Errorf("unable to convert configz: %w", err)
	}
	externalConfig.SetGroupVersionKind(configv1alpha1.SchemeGroupVersion.WithKind("KubeControllerManagerConfiguration"))

	if cfgz, err := configz.New(app.ConfigzName); err != nil {
		return fmt.Errorf("unable to register configz: %w", err)
	} else if err := cfgz.Set(externalConfig); err != nil {
		return fmt.Errorf("unable to set configz: %w", err)
	}

	// Setup any healthz checks we will want to use.
	var checks []healthz.HealthChecker
	var electionChecker *leaderelection.HealthzAdaptor
	if c.ComponentConfig.Generic.LeaderElection.LeaderElect {
		electionChecker = leaderelection.NewLeaderHealthzAdaptor(time.Second * 20)
		checks = append(checks, electionChecker)
	}
	healthzHandler := controllerhealthz.NewMutableHealthzHandler(checks...)

	// Start the controller manager HTTP server
	// unsecuredMux is the handler for these controller *after* authn/authz filters have been applied
	var unsecuredMux *mux.PathRecorderMux
	if c.SecureServing != nil {
		unsecuredMux = genericcontrollermanager.NewBaseHandler(&c.ComponentConfig.Generic.Debugging, healthzHandler)
		slis.SLIMetricsWithReset{}.Install(unsecuredMux)
		if utilfeature.DefaultFeatureGate.Enabled(zpagesfeatures.ComponentFlagz) {
			if c.Flagz != nil {
				flagz.Install(unsecuredMux, kubeControllerManager, c.Flagz)
			}
		}

		if utilfeature.DefaultFeatureGate.Enabled(zpagesfeatures.ComponentStatusz) {
			statusz.Install(
				unsecuredMux,
				kubeControllerManager,
				statusz.NewRegistry(
					c.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent),
					statusz.WithListedPaths(unsecuredMux.ListedPaths()),
				),
			)
		}

		handler := genericcontrollermanager.BuildHandlerChain(unsecuredMux, &c.Authorization, &c.Authentication)
		// TODO: handle stoppedCh and listenerStoppedCh returned by c.SecureServing.Serve
		if _, _, err := c.SecureServing.Serve(handler, 0, stopCh); err != nil {
			return err
		}
	}

	clientBuilder, rootClientBuilder := createClientBuilders(c)

	run := func(ctx context.Context, controllerDescriptors map[string]*app.ControllerDescriptor) error {
		controllerContext, metadataInformers, err := createControllerContext(ctx, c, rootClientBuilder, clientBuilder, db)
		if err != nil {
			logger.Error(err, "Error building controller context")
			return err
		}
		// boltinformer: the informers stop, and their last changes are
		// committed, before db is closed.
		defer metadataInformers.Shutdown()

		// Always start the SA token controller first using a full-power client, since it needs to mint tokens for the rest
		// (upstream's BuildControllers does this with a descriptor only its package can build).
		// As upstream, it is built whatever --controllers says; only a
		// missing --service-account-private-key-file disables it.
		var controllers []app.Controller
		{
			saCtx := klog.NewContext(ctx, klog.LoggerWithName(logger, names.ServiceAccountTokenController))
			saTokenController, err := newServiceAccountTokenController(saCtx, controllerContext, names.ServiceAccountTokenController, rootClientBuilder)
			if err != nil {
				logger.Error(err, "Error initializing a controller", "controller", names.ServiceAccountTokenController)
				return err
			}
			if saTokenController != nil {
				controllers = append(controllers, saTokenController)
				healthzHandler.AddHealthChecker(controllerhealthz.NamedPingChecker(names.ServiceAccountTokenController))
			}
		}

		// Prepare all controllers in advance.
		built, err := app.BuildControllers(ctx, controllerContext, controllerDescriptors, unsecuredMux, healthzHandler)
		if err != nil {
			logger.Error(err, "Error building controllers")
			return err
		}
		controllers = append(controllers, built...)

		// Start the informers.
		stopCh := ctx.Done()
		controllerContext.InformerFactory.Start(stopCh)
		defer controllerContext.InformerFactory.Shutdown()
		controllerContext.ObjectOrMetadataInformerFactory.Start(stopCh)
		close(controllerContext.InformersStarted)

		// Actually start the controllers.
		if len(controllers) > 0 {
			if !app.RunControllers(ctx, controllerContext, controllers, app.ControllerStartJitter, c.ControllerShutdownTimeout) {
				return errors.New("controller shutdown timeout reached")
			}
		} else {
			<-ctx.Done()
		}
		return nil
	}

	// No leader election, run directly
	if !c.ComponentConfig.Generic.LeaderElection.LeaderElect {
		return run(ctx, app.NewControllerDescriptors())
	}

	id, err := os.Hostname()
	if err != nil {
		return err
	}

	// add a uniquifier so that two processes on the same host don't accidentally both become active
	id = id + "_" + string(uuid.NewUUID())

	if utilfeature.DefaultFeatureGate.Enabled(kubefeatures.CoordinatedLeaderElection) {
		binaryVersion, err := semver.ParseTolerant(c.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent).BinaryVersion().String())
		if err != nil {
			return err
		}
		emulationVersion, err := semver.ParseTolerant(c.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent).EmulationVersion().String())
		if err != nil {
			return err
		}

		// Start lease candidate controller for coordinated leader election
		leaseCandidate, waitForSync, err := leaderelection.NewCandidate(
			c.Client,
			"kube-system",
			id,
			kubeControllerManager,
			binaryVersion.FinalizeVersion(),
			emulationVersion.FinalizeVersion(),
			coordinationv1.OldestEmulationVersion,
		)
		if err != nil {
			return err
		}
		healthzHandler.AddHealthChecker(healthz.NewInformerSyncHealthz(waitForSync))

		go leaseCandidate.Run(ctx)
	}

	// Start the main lock.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// startedLeading must be used to wrap any OnStartedLeading leader election callback.
	var (
		errs     []error
		errsLock sync.Mutex
	)
	startedLeading := func(next func(context.Context) error) func(context.Context) {
		return func(ctx context.Context) {
			// It's more efficient to cancel the context at the end of OnStartedLeading to signal termination,
			// because OnStoppedLeading is only called once the LE lock is released.
			defer cancel()
			if err := next(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errsLock.Lock()
				errs = append(errs, err)
				errsLock.Unlock()
			}
		}
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		leaderElectAndRun(ctx, c, id, electionChecker,
			c.ComponentConfig.Generic.LeaderElection.ResourceLock,
			c.ComponentConfig.Generic.LeaderElection.ResourceName,
			leaderelection.LeaderCallbacks{
				OnStartedLeading: startedLeading(func(ctx context.Context) error {
					return run(ctx, app.NewControllerDescriptors())
				}),
				OnStoppedLeading: func() {
					logger.Error(nil, "leaderelection lost/stopped")
					if !utilfeature.DefaultFeatureGate.Enabled(cmfeatures.ControllerManagerReleaseLeaderElectionLockOnExit) {
						klog.FlushAndExit(klog.ExitFlushTimeout, 1)
					}
				},
			})
	})

	// Block until all leader elections are stopped.
	wg.Wait()
	// There is no need to hold errsLock since by this time all goroutines have terminated.
	return utilerrors.NewAggregate(errs)
}

// createClientBuilders creates clientBuilder and rootClientBuilder from the given configuration
func createClientBuilders(c *config.CompletedConfig) (clientBuilder clientbuilder.ControllerClientBuilder, rootClientBuilder clientbuilder.ControllerClientBuilder) {

	rootClientBuilder = clientbuilder.SimpleControllerClientBuilder{
		ClientConfig: c.Kubeconfig,
	}
	if c.ComponentConfig.KubeCloudShared.UseServiceAccountCredentials {

		clientBuilder = clientbuilder.NewDynamicClientBuilder(
			restclient.AnonymousClientConfig(c.Kubeconfig),
			c.Client.CoreV1(),
			metav1.NamespaceSystem)
	} else {
		clientBuilder = rootClientBuilder
	}
	return
}

// leaderElectAndRun runs the leader election, and runs the callbacks once the leader lease is acquired.
func leaderElectAndRun(ctx context.Context, c *config.CompletedConfig, lockIdentity string, electionChecker *leaderelection.HealthzAdaptor, resourceLock string, leaseName string, callbacks leaderelection.LeaderCallbacks) {
	logger := klog.FromContext(ctx)
	rl, err := resourcelock.NewFromKubeconfig(resourceLock,
		c.ComponentConfig.Generic.LeaderElection.ResourceNamespace,
		leaseName,
		resourcelock.ResourceLockConfig{
			Identity:      lockIdentity,
			EventRecorder: c.EventRecorder,
		},
		c.Kubeconfig,
		c.ComponentConfig.Generic.LeaderElection.RenewDeadline.Duration)
	if err != nil {
		logger.Error(err, "Error creating lock")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}

	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            rl,
		LeaseDuration:   c.ComponentConfig.Generic.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:   c.ComponentConfig.Generic.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:     c.ComponentConfig.Generic.LeaderElection.RetryPeriod.Duration,
		Callbacks:       callbacks,
		WatchDog:        electionChecker,
		ReleaseOnCancel: utilfeature.DefaultFeatureGate.Enabled(cmfeatures.ControllerManagerReleaseLeaderElectionLockOnExit),
		Name:            leaseName,
		Coordinated:     utilfeature.DefaultFeatureGate.Enabled(kubefeatures.CoordinatedLeaderElection),
	})
}
