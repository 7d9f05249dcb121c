-- The key layout version this package writes and reads, and the about
-- field of the meta hash (keys.go).

local LAYOUT, ABOUT = '$LAYOUTVERSION', '$METAABOUT'
