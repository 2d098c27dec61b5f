package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// outOfServiceTaint is the taint whose writes I1 and I2 judge.
const outOfServiceTaint = "node.kubernetes.io/out-of-service"

// ActKind classifies a write the operator made.
type ActKind string

// Act kinds. The first three are destructive: I1 judges them.
const (
	ActTaint        ActKind = "out-of-service-taint"
	ActPodDelete    ActKind = "pod-delete"
	ActDetachVolume ActKind = "volumeattachment-delete"
	ActWrite        ActKind = "write"
)

// Act is one successful write by the operator, read from an API server's
// audit log (the server's clock, on this machine the runner's too).
type Act struct {
	Cluster   string    `json:"cluster"`
	Time      time.Time `json:"time"`
	Kind      ActKind   `json:"kind"`
	Verb      string    `json:"verb"`
	Resource  string    `json:"resource"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	// Node is the node a destructive act concerned.
	Node      string `json:"node,omitempty"`
	UserAgent string `json:"userAgent"`
}

func (a Act) destructive() bool { return a.Kind != ActWrite }

// classify turns one audit line into an Act when it is a successful write
// whose user agent starts with agent.
func classify(cluster, agent string, line []byte) (Act, bool) {
	e, ok := lab.SuccessfulWrite(line)
	if !ok || !strings.HasPrefix(e.UserAgent, agent) {
		return Act{}, false
	}
	a := Act{Cluster: cluster, Time: e.Received, Kind: ActWrite, Verb: e.Verb, Resource: e.Resource(),
		Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name, UserAgent: e.UserAgent}
	switch {
	case a.Resource == "pods" && e.Verb == "delete":
		a.Kind, a.Node = ActPodDelete, specNodeName(e.ResponseObject)
	case a.Resource == "volumeattachments" && e.Verb == "delete":
		a.Kind, a.Node = ActDetachVolume, specNodeName(e.ResponseObject)
	case a.Resource == "nodes" && (e.Verb == "patch" || e.Verb == "update") &&
		bytes.Contains(e.RequestObject, []byte(outOfServiceTaint)) && hasOutOfServiceTaint(e.ResponseObject):
		a.Kind, a.Node = ActTaint, a.Name
	}
	return a, true
}

func specNodeName(obj json.RawMessage) string {
	var o struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(obj, &o)
	return o.Spec.NodeName
}

func hasOutOfServiceTaint(obj json.RawMessage) bool {
	var o struct {
		Spec struct {
			Taints []struct {
				Key string `json:"key"`
			} `json:"taints"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(obj, &o)
	for _, t := range o.Spec.Taints {
		if t.Key == outOfServiceTaint {
			return true
		}
	}
	return false
}

// auditTail reads an audit log incrementally, whole lines only.
type auditTail struct {
	cluster, path, agent string
	offset               int64
}

// read returns the operator's acts written since the last read.
func (t *auditTail) read() ([]Act, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var acts []Act
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // a partial last line is read again next time
			if errors.Is(err, io.EOF) {
				return acts, nil
			}
			return acts, err
		}
		t.offset += int64(len(line))
		if a, ok := classify(t.cluster, t.agent, line); ok {
			acts = append(acts, a)
		}
	}
}
