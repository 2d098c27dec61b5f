package lab

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

// AttachedAnnotation is set to "true" on a pod by the lab's attacher when all
// of the pod's PersistentVolumeClaims are attached to the pod's node; kwok's
// pod-ready stage for PVC pods selects on it.
const AttachedAnnotation = "lab.fedfailover.io/volumes-attached"

//go:embed stages/stages.yaml
var stagesTemplate string

//go:embed stages/pod-running.yaml
var podRunningStatus string

// StageParams fills the lab's kwok Stage template.
type StageParams struct {
	CPU, Memory, Pods     string
	KubeletVersion        string
	HeartbeatMillis       int
	HeartbeatJitterMillis int
	PodDeleteMillis       int
	AttachedAnnotation    string
	PodRunningStatus      string
}

// DefaultStageParams are the values the lab runs with.
func DefaultStageParams() StageParams {
	return StageParams{
		CPU:                   "4",
		Memory:                "16Gi",
		Pods:                  "110",
		KubeletVersion:        "v1.37.2",
		HeartbeatMillis:       30000,
		HeartbeatJitterMillis: 10000,
		AttachedAnnotation:    AttachedAnnotation,
	}
}

// RenderStages returns the multi-document kwok config holding the lab's
// Stages. The [[ ]] delimiters keep kwok's own {{ }} templates intact.
func RenderStages(p StageParams) ([]byte, error) {
	if p.AttachedAnnotation == "" {
		return nil, fmt.Errorf("render stages: empty attached annotation")
	}
	if p.PodRunningStatus == "" {
		p.PodRunningStatus = strings.TrimRight(podRunningStatus, "\n")
	}
	t, err := template.New("stages").Delims("[[", "]]").Option("missingkey=error").Parse(stagesTemplate)
	if err != nil {
		return nil, fmt.Errorf("parse stage template: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("render stages: %w", err)
	}
	return buf.Bytes(), nil
}
