package contract

// Labels on the shard Leases in the manager's namespace (controllers/member):
// one Lease per replica (a peer) and one per member it holds.
const (
	// LabelShardPeer marks a replica's peer Lease ("true").
	LabelShardPeer = Prefix + "shard-peer"
	// LabelShardMember marks a member's Lease ("true").
	LabelShardMember = Prefix + "shard-member"
)
