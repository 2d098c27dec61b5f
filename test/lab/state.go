package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// StateFile is the name of the lab's state file inside its directory. Every
// process that operates on a running lab (the supervisor, status, down, fault
// commands) reads and writes it under an flock.
const StateFile = "state.json"

// Component names, in start order. Stop order is the reverse.
const (
	CompEtcd       = "etcd"
	CompAPIServer  = "kube-apiserver"
	CompKCM        = "kube-controller-manager"
	CompScheduler  = "kube-scheduler"
	CompKwok       = "kwok"
	CompKubefedCM  = "kubefed-controller-manager"
	RoleHost       = "host"
	RoleMember     = "member"
	RoleManagement = "management"
	HostName       = "host"
	// ManagementName is the Cluster API management cluster of a lab started
	// with Options.ManagementCluster.
	ManagementName = "mgmt"
	KubefedNS      = "kube-federation-system"
	labStateLockFn = "state.lock"
)

// stopRank orders components for teardown: higher stops first.
var stopRank = map[string]int{
	CompKubefedCM: 6, CompKwok: 5, CompScheduler: 4, CompKCM: 3, CompAPIServer: 2, CompEtcd: 1,
}

// Proc is one lab process. Everything needed to restart it is recorded, so a
// CLI invocation other than the supervisor can restart it.
type Proc struct {
	Component string   `json:"component"`
	Cluster   string   `json:"cluster"`
	Node      string   `json:"node,omitempty"`
	PID       int      `json:"pid"`
	Binary    string   `json:"binary"`
	Args      []string `json:"args"`
	Env       []string `json:"env,omitempty"`
	Log       string   `json:"log"`
	Port      int      `json:"port,omitempty"`
	// StartedAt is when it was last started (just before exec).
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// Key identifies a process within the lab.
func (p *Proc) Key() string {
	if p.Node != "" {
		return p.Cluster + "/" + p.Component + "/" + p.Node
	}
	return p.Cluster + "/" + p.Component
}

// NodeState describes a kwok node (its own failure domain).
type NodeState struct {
	Name string `json:"name"`
	Zone string `json:"zone"`
	// Evidence is the last power-off evidence applied, "" when powered on.
	Evidence string `json:"evidence,omitempty"`
}

// ClusterState describes one lab cluster.
type ClusterState struct {
	Name          string      `json:"name"`
	Role          string      `json:"role"`
	Index         int         `json:"index"`
	Dir           string      `json:"dir"`
	Kubeconfig    string      `json:"kubeconfig"`
	APIPort       int         `json:"apiPort"`
	EtcdPort      int         `json:"etcdPort"`
	EtcdPeerPort  int         `json:"etcdPeerPort"`
	KCMPort       int         `json:"kcmPort"`
	SchedulerPort int         `json:"schedulerPort"`
	Nodes         []NodeState `json:"nodes,omitempty"`
}

// State is the persisted description of a running lab.
type State struct {
	Dir           string          `json:"dir"`
	BinDir        string          `json:"binDir"`
	Kubeconfig    string          `json:"kubeconfig"`
	SupervisorPID int             `json:"supervisorPID"`
	StartedAt     time.Time       `json:"startedAt"`
	Ready         bool            `json:"ready"`
	StartupSecs   float64         `json:"startupSeconds,omitempty"`
	Options       Options         `json:"options"`
	Clusters      []*ClusterState `json:"clusters"`
	// Management is the Cluster API management cluster, when the lab has
	// one (Options.ManagementCluster): a control plane without nodes that
	// holds the members' Clusters and Machines. It is not in Clusters,
	// which is the host and the members.
	Management *ClusterState `json:"management,omitempty"`
	Procs      []*Proc       `json:"procs"`
}

// Cluster returns the named cluster or nil.
func (s *State) Cluster(name string) *ClusterState {
	for _, c := range s.Clusters {
		if c.Name == name {
			return c
		}
	}
	if s.Management != nil && s.Management.Name == name {
		return s.Management
	}
	return nil
}

// Proc returns the process with the given key or nil.
func (s *State) Proc(key string) *Proc {
	for _, p := range s.Procs {
		if p.Key() == key {
			return p
		}
	}
	return nil
}

// SetProc inserts or replaces a process record.
func (s *State) SetProc(p *Proc) {
	for i, q := range s.Procs {
		if q.Key() == p.Key() {
			s.Procs[i] = p
			return
		}
	}
	s.Procs = append(s.Procs, p)
}

// NodeCluster returns the member cluster that owns node, or nil.
func (s *State) NodeCluster(node string) (*ClusterState, *NodeState) {
	for _, c := range s.Clusters {
		for i := range c.Nodes {
			if c.Nodes[i].Name == node {
				return c, &c.Nodes[i]
			}
		}
	}
	return nil, nil
}

// ErrNoLab is returned when a directory holds no lab state.
var ErrNoLab = errors.New("no lab state found (run `fedfailover-lab up` first)")

// withStateLock runs fn holding an exclusive flock on the lab directory.
func withStateLock(dir string, fn func() error) error {
	f, err := os.OpenFile(filepath.Join(dir, labStateLockFn), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open state lock: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock state: %w", err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	return fn()
}

// LoadState reads the state of the lab in dir.
func LoadState(dir string) (*State, error) {
	var st *State
	err := withStateLock(dir, func() error {
		var err error
		st, err = readState(dir)
		return err
	})
	return st, err
}

func readState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoLab
	}
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("parse %s: %w", StateFile, err)
	}
	return st, nil
}

func writeState(dir string, st *State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	// Rename is atomic, so readers never see half a file.
	return os.Rename(tmp, filepath.Join(dir, StateFile))
}

// UpdateState applies fn to the state under the lock and writes it back.
func UpdateState(dir string, fn func(*State) error) error {
	return withStateLock(dir, func() error {
		st, err := readState(dir)
		if err != nil {
			return err
		}
		if err := fn(st); err != nil {
			return err
		}
		return writeState(dir, st)
	})
}
