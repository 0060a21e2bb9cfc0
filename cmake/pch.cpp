// Owns the precompiled header that every gcrun target reuses (see gcrun_pch in CMakeLists.txt).
