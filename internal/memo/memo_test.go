package memo

import "testing"

func TestMapBoundedAndCleared(t *testing.T) {
	m := Map[int, string]{Max: 3}
	for i := 0; i < 3; i++ {
		m.Put(i, "v")
	}
	if v, ok := m.Get(2); !ok || v != "v" || m.Len() != 3 {
		t.Fatalf("get 2: %q %v, len %d", v, ok, m.Len())
	}
	m.Put(3, "w") // full: cleared first
	if _, ok := m.Get(0); ok || m.Len() != 1 {
		t.Fatalf("a full map was not cleared: len %d", m.Len())
	}
	if v, ok := m.Get(3); !ok || v != "w" {
		t.Fatalf("get 3: %q %v", v, ok)
	}
	var none Map[int, int]
	none.Put(1, 1)
	if _, ok := none.Get(1); ok {
		t.Fatal("a zero Max map stored an entry")
	}
}
