package fencing

import (
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultMaxUnhealthy is used when a policy leaves maxUnhealthy unset; it
// matches the API default.
var DefaultMaxUnhealthy = intstr.FromString("40%")

// MaxLost is how many lost nodes maxUnhealthy allows among totalNodes. A
// percentage rounds down, as Cluster API's MachineHealthCheck does: fewer
// allowed means stopping sooner, the safe side. An invalid value allows none.
func MaxLost(totalNodes int, maxUnhealthy *intstr.IntOrString) int {
	if maxUnhealthy == nil {
		maxUnhealthy = &DefaultMaxUnhealthy
	}
	allowed, err := intstr.GetScaledValueFromIntOrPercent(maxUnhealthy, max(totalNodes, 0), false)
	if err != nil || allowed < 0 {
		return 0
	}
	return allowed
}

// Storm reports whether more nodes are lost than maxUnhealthy allows: then
// a network or control-plane failure is more likely than dead machines, and
// no node of the member is recovered.
func Storm(lostNodes, totalNodes int, maxUnhealthy *intstr.IntOrString) bool {
	return lostNodes > MaxLost(totalNodes, maxUnhealthy)
}

// StormState is the durable storm state of one member, kept by the caller
// between decisions (node recovery keeps it in an annotation on the
// member's KubeFedCluster, contract.AnnotationStorm).
type StormState struct {
	// Active is true from the start of a storm until its cooldown has passed.
	Active bool
	// EndedAt is when lost nodes last came back within maxUnhealthy; zero
	// while the storm is still going on.
	EndedAt time.Time
}

// StormDecision is the next storm state and what it means for recovery.
type StormDecision struct {
	State StormState
	// Suspended is true while recovery must not act in the member.
	Suspended bool
	// ResumeAt is when the cooldown ends (zero unless cooling down).
	ResumeAt time.Time
}

// NextStormState steps the storm state machine: a storm starts as soon as
// storming is true, and recovery resumes only after storming has stayed
// false for cooldown. A storm that comes back during the cooldown restarts
// it, so a flapping member stays suspended.
func NextStormState(prev StormState, storming bool, now time.Time, cooldown time.Duration) StormDecision {
	switch {
	case storming:
		return StormDecision{State: StormState{Active: true}, Suspended: true}
	case !prev.Active:
		return StormDecision{}
	}
	endedAt := prev.EndedAt
	if endedAt.IsZero() {
		endedAt = now
	}
	resumeAt := endedAt.Add(cooldown)
	if !now.Before(resumeAt) {
		return StormDecision{}
	}
	return StormDecision{State: StormState{Active: true, EndedAt: endedAt}, Suspended: true, ResumeAt: resumeAt}
}
