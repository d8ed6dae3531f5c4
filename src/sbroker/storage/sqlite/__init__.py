"""storage/sqlite"""
