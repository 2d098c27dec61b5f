package lab

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"
)

const fileAuditPolicy = "audit-policy.yaml"

// auditPolicy records every write. Writes by service accounts (the member
// credentials kubefedctl join creates: kubefed and fedfailover) to Nodes,
// Pods and VolumeAttachments are recorded with their request and response,
// so a checker sees which taint a patch set and which node a deleted pod or
// attachment was on. Writes to RSPs and FederatedDeployments carry their
// request, so a run's placement history can be read back. Lease writes
// outside kube-node-lease (leader election, fedfailover's shard Leases)
// carry their request, so a checker reads each Lease's holders and their
// terms; the nodes' own Lease renewals stay at Metadata. Reads are not
// recorded.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  userGroups: ["system:serviceaccounts"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: ""
    resources: ["nodes", "pods"]
  - group: "storage.k8s.io"
    resources: ["volumeattachments"]
- level: Request
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "scheduling.kubefed.io"
    resources: ["replicaschedulingpreferences"]
  - group: "types.kubefed.io"
    resources: ["federateddeployments"]
- level: Metadata
  namespaces: ["kube-node-lease"]
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Request
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// AuditLogPath is the audit log of a cluster's API server (Options.AuditLog).
func AuditLogPath(c *ClusterState) string { return filepath.Join(c.Dir, "logs", "audit.log") }

// StopEtcd SIGKILLs a cluster's etcd: its API server stays up but can
// neither read nor write, as when a member's datastore fails.
// A lab whose clusters share one etcd (SharedEtcd) refuses: one member's
// datastore cannot fail alone there.
func (l *Lab) StopEtcd(cluster string) error {
	if l.opts.SharedEtcd {
		return errSharedEtcd
	}
	return l.killComponent(cluster, CompEtcd)
}

var errSharedEtcd = errors.New("the lab's clusters share one etcd (SharedEtcd): one cluster's etcd cannot be stopped alone")

// StartEtcd starts a stopped etcd again on its data and waits until healthy.
func (l *Lab) StartEtcd(ctx context.Context, cluster string) error {
	if l.opts.SharedEtcd {
		return errSharedEtcd
	}
	c, err := l.clusterState(cluster)
	if err != nil {
		return err
	}
	_, err = l.restartProc(ctx, cluster+"/"+CompEtcd, etcdHealthy(c.EtcdPort))
	return err
}

// AuditEvent is the part of an audit.k8s.io/v1 Event the lab's checkers
// read from AuditLogPath.
type AuditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject json.RawMessage `json:"responseObject"`
	Received       time.Time       `json:"requestReceivedTimestamp"`
}

var auditWriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// SuccessfulWrite decodes one audit log line; ok only for a write (create,
// update, patch, delete) that completed with a 2xx status.
func SuccessfulWrite(line []byte) (e AuditEvent, ok bool) {
	ok = json.Unmarshal(line, &e) == nil && e.Stage == "ResponseComplete" && auditWriteVerbs[e.Verb] &&
		e.ObjectRef != nil && e.ResponseStatus != nil && e.ResponseStatus.Code < 300
	return e, ok
}

// Resource is the event's resource with its subresource ("nodes/status").
func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}
