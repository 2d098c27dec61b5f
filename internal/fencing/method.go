package fencing

import "github.com/fedfailover/fedfailover/api/v1alpha1"

// ChooseMethod resolves Auto (or an empty method) to the out-of-service
// taint on API servers 1.28 or newer (non-graceful node shutdown is GA
// there) and to ForceDelete on older ones. With the member's version unknown
// (0.0) Auto resolves to nothing: the caller must not act on a guess.
// Explicit methods are kept as they are.
func ChooseMethod(method v1alpha1.RecoveryMethod, serverMajor, serverMinor int) v1alpha1.RecoveryMethod {
	if method != v1alpha1.RecoveryMethodAuto && method != "" {
		return method
	}
	switch {
	case serverMajor == 0:
		return ""
	case serverMajor > 1 || (serverMajor == 1 && serverMinor >= 28):
		return v1alpha1.RecoveryMethodOutOfServiceTaint
	}
	return v1alpha1.RecoveryMethodForceDelete
}
