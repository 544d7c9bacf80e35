package widgets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
)

// Field indexes. Their extractors are declared with a version in
// PersistentCache, so the persistent cache reuses them across restarts.
const (
	// OwnerField indexes ConfigMaps by the name of the Widget controlling them.
	OwnerField = ".metadata.controller"
	// ServiceField indexes Widgets by the Service they name.
	ServiceField = "spec.serviceName"
)

// Reconciler makes each Widget's ConfigMap match the Widget.
type Reconciler struct {
	client.Client

	// Checkpoint, if set, names the reconciler's checkpoint in the
	// persistent cache (boltcr.Checkpoint): a warm restart then reconciles
	// only the Widgets whose inputs changed since their last successful
	// reconcile — the Widget itself, its ConfigMap, the Service it names —
	// rather than every Widget. The reconciler qualifies: what it writes
	// depends only on those three, all watched.
	Checkpoint string
}

// SetupWithManager registers the indexes and the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, OwnerField, ownerOf); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &Widget{}, ServiceField, serviceOf); err != nil {
		return err
	}
	// Owns(&corev1.ConfigMap{}) is this Watches; written out so the
	// checkpoint can wrap its handler.
	owned := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Widget{}, handler.OnlyControllerOwner())
	services := handler.EnqueueRequestsFromMapFunc(r.widgetsNaming)
	var forOptions []builder.ForOption
	var reconciler reconcile.Reconciler = r
	if r.Checkpoint != "" {
		cp, err := boltcr.NewCheckpoint(ctx, mgr.GetCache(), r.Checkpoint, &Widget{})
		if err != nil {
			return err
		}
		if owned, err = cp.Secondary(ctx, &corev1.ConfigMap{}, owned); err != nil {
			return err
		}
		svc := &metav1.PartialObjectMetadata{}
		svc.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
		if services, err = cp.Secondary(ctx, svc, services); err != nil {
			return err
		}
		forOptions = append(forOptions, cp.ForOption())
		reconciler = cp.Reconciler(r)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&Widget{}, forOptions...).
		Watches(&corev1.ConfigMap{}, owned).
		Watches(&corev1.Service{}, services, builder.OnlyMetadata).
		WithOptions(options).
		Complete(reconciler)
}

// ownerOf is the OwnerField extractor.
func ownerOf(obj client.Object) []string {
	countOwnerIndex()
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.APIVersion != GroupVersion.String() || owner.Kind != "Widget" {
		return nil
	}
	return []string{owner.Name}
}

// serviceOf is the ServiceField extractor.
func serviceOf(obj client.Object) []string {
	if w, ok := obj.(*Widget); ok && w.Spec.ServiceName != "" {
		return []string{w.Spec.ServiceName}
	}
	return nil
}

// widgetsNaming maps a Service (metadata only) to the Widgets naming it.
func (r *Reconciler) widgetsNaming(ctx context.Context, svc client.Object) []reconcile.Request {
	var widgets WidgetList
	if err := r.List(ctx, &widgets, client.InNamespace(svc.GetNamespace()), client.MatchingFields{ServiceField: svc.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Widgets of a Service")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(widgets.Items))
	for _, w := range widgets.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: w.Name}})
	}
	return reqs
}

// ConfigMapName is the name of a Widget's ConfigMap.
func ConfigMapName(widget string) string { return widget + "-config" }

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	countReconcile(req)
	var w Widget
	err := r.Get(ctx, req.NamespacedName, &w)
	if apierrors.IsNotFound(err) {
		// Deleted, perhaps while the operator was down: remove what it owned.
		return ctrl.Result{}, r.deleteOwned(ctx, req.Namespace, req.Name, "")
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	service := "absent"
	if w.Spec.ServiceName != "" {
		svc := &metav1.PartialObjectMetadata{}
		svc.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
		switch err := r.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Spec.ServiceName}, svc); {
		case err == nil:
			service = "present"
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, err
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: ConfigMapName(w.Name)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"message": w.Spec.Message, "service": service}
		return controllerutil.SetControllerReference(&w, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the ConfigMap of Widget %s: %w", req, err)
	}
	return ctrl.Result{}, r.deleteOwned(ctx, w.Namespace, w.Name, cm.Name)
}

// deleteOwned deletes the ConfigMaps the named Widget controls, except keep.
func (r *Reconciler) deleteOwned(ctx context.Context, namespace, widget, keep string) error {
	var owned corev1.ConfigMapList
	if err := r.List(ctx, &owned, client.InNamespace(namespace), client.MatchingFields{OwnerField: widget}); err != nil {
		return err
	}
	for i := range owned.Items {
		if cm := &owned.Items[i]; cm.Name != keep {
			if err := r.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}
