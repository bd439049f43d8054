"""Pod Security admission: the standards' checks (`checks`), which run per level and version
(`evaluate`), a namespace's policy from its labels (`policy`) and the plugin (`plugin`)."""
