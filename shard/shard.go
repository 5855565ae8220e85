// Package shard splits a site's hosts into shards and places the shards'
// Raft replicas and leaders over the site's nodes. It is pure: no I/O, no
// goroutines, no clock; every node computes the same answer from the same
// input.
//
// A host's shard is Of(partition.Key(host, ips), shards): every host behind
// one address has the same politeness key, so it lands in one shard and the
// per-address politeness of one fetcher holds site-wide. The shard count of
// a site is fixed when the site is created (DefaultShards unless chosen).
//
// Place computes the target placement of the shards' replicas and leaders
// from the site's nodes and the current placement; Steps turns (current,
// target) into the membership changes and leadership transfers a caller
// executes one at a time; UnderReplicated names the shards with fewer
// replicas than the site's target.
package shard

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// DefaultShards is the shard count of a new site, the one-command site's
// included.
//
// 24 = 2^3·3 divides evenly over 1, 2, 3, 4, 6, 8, 12 and 24 nodes, so a
// site of any of those sizes leads exactly S/N shards per node; 24 nodes is
// the most that each lead one (and fetch), and with R = 3 its 72 replicas
// spread evenly over any node count that divides 72. For the other sizes up to 20 nodes the best
// leader balance (max/min leaders per node, which Place reaches;
// TestLeaderBalanceTable checks it) is 5/4 at 5 nodes, 4/3 at 7, 3/2 at 9
// to 11 and 2/1 at 13 to 20 nodes. Every shard is a Raft group with its own
// heartbeats, log and round pipeline, and a one-node site runs all of them:
// bench site measured one node of 24 shards at 1.01× the CPU per page of
// the unsharded node (the old design), of 16 at 1.03× and of 48 at 1.17×
// (bench/README, "One design"), so 24 is the most measured that costs a
// one-node site nothing. 48 (even at 16 nodes too) waits for the per-shard
// cost to go; a site created with --shards keeps its own count.
const DefaultShards = 24

// mixDomain separates Of's hash from partition's ring, which hashes the same
// key with xxhash to choose the owning site: without it, the hosts a site
// owns (hashes on its arcs of the ring) would not be a uniform sample of the
// hash space.
const mixDomain = 0x5348415244_0001 // "SHARD", 1

// Of returns the shard, in [0, shards), of the host whose politeness key
// (partition.Key) is key. It is jump consistent hashing (Lamping and Veach,
// 2014) of a 64-bit hash of key: keys spread evenly, and going from n to n+1
// shards moves only about 1/(n+1) of the keys, all of them to shard n. It
// panics if shards < 1: the shard count of a site is fixed and validated when
// the site is created.
func Of(key string, shards int) int {
	if shards < 1 {
		panic(fmt.Sprintf("shard: Of: shard count %d, want at least 1", shards))
	}
	return jump(mix(xxhash.Sum64String(key)^mixDomain), shards)
}

// mix is a bijective 64-bit finaliser (the splitmix64 output function).
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// jump maps h to a bucket in [0, n). The paper's idea: follow the sequence of
// buckets a key jumps to as the bucket count grows; from bucket b, the next
// count at which the key jumps is drawn from a pseudo-random sequence seeded
// by the key, so that the key sits in bucket n-1 of n buckets with
// probability 1/n. The sequence is a 64-bit linear congruential generator; its
// top 31 bits give a uniform r in (0, 1], and the next jump is at (b+1)/r.
func jump(h uint64, n int) int {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		h = h*2862933555777941757 + 1
		r := float64(h>>33) + 1 // in [1, 2^31]
		j = int64(float64(b+1) * (float64(uint64(1)<<31) / r))
	}
	return int(b)
}
