"""Chrome-trace reading, joining and storing: one path for wlprof's runs and foreign traces."""
