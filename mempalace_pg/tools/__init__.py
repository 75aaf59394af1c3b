"""The tools around a palace, behind the ``mempalace-pg`` command: migrate (and the Chroma file
reader it uses), backup and restore, export and import, doctor."""
