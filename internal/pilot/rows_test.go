package pilot_test

import "github.com/harbormaster-dev/harbormaster/internal/pilot"

// byName is res's rows as maps from column name to value, for the tests
// whose results name each column once.
func byName(res *pilot.Result) []map[string]any {
	out := make([]map[string]any, len(res.Rows))
	for i, row := range res.Rows {
		m := make(map[string]any, len(row))
		for j, c := range res.Columns {
			if _, dup := m[c.Name]; !dup && j < len(row) {
				m[c.Name] = row[j]
			}
		}
		out[i] = m
	}
	return out
}

// columnTypes are the type OIDs of res's columns, in order.
func columnTypes(res *pilot.Result) []uint32 {
	if res.Columns == nil {
		return nil
	}
	out := make([]uint32, len(res.Columns))
	for i, c := range res.Columns {
		out[i] = c.Type
	}
	return out
}
