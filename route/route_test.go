package route

import "testing"

func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		o    Owner
		here bool
		name string
	}{
		{Owner{}, true, "shard 0"},
		{Owner{Shard: 3}, true, "shard 3"},
		{Owner{Site: "us"}, false, "us"},
		{Owner{Site: "us", Shard: 2}, false, "us/shard 2"},
	} {
		if tc.o.Here() != tc.here || tc.o.String() != tc.name {
			t.Errorf("%#v: Here %v, String %q; want %v, %q", tc.o, tc.o.Here(), tc.o.String(), tc.here, tc.name)
		}
	}
}
