<?php
/**
 * Lazy loading that works with WordPress core's own (6.3+), never against it.
 *
 * Core already gives `loading="lazy"`, `fetchpriority="high"` and `decoding="async"` to the images it
 * can classify: content images with a width and a height, and images made by the attachment functions
 * while it knows where they are. This class only completes what core leaves out, and never adds an
 * attribute an image already has:
 *
 * - content, block-widget and template images without a width or a height (core cannot measure them, so
 *   it adds only `decoding`): the first one, while no image of the page took `fetchpriority="high"`,
 *   is taken as the likely LCP image and stays eager with `fetchpriority="high"`; the next ones up to
 *   core's own threshold (wp_omit_loading_attr_threshold(), 3) stay eager; the rest are lazy;
 * - widgets core never filters (Custom HTML, and the classic Text widget in its plain mode): lazy, with
 *   `decoding="async"`;
 * - images the attachment functions make inside a `the_content` filter that runs after core's own
 *   (related posts, share boxes added at a late priority): core leaves them bare and nothing processes
 *   them afterwards, so they get `loading="lazy"` and `decoding="async"`.
 *
 * An image with `loading`, `fetchpriority`, a `data-no-lazy` attribute or a `skip-lazy`/`no-lazy`
 * class is left as it is; the `compresso_lazy_load_enabled` filter (`$enabled, $context, $html`)
 * turns this off per context.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Adds the loading attributes core leaves out.
 */
class Compresso_Lazy {

	/** Contexts of images that sit in widget areas (never the LCP image). */
	const WIDGET_CONTEXTS = array( 'widget_custom_html_content', 'widget_text', 'widget_text_content', 'widget_block_content' );

	/**
	 * @param string $context Where the image is.
	 * @param string $html    The markup.
	 * @return bool Whether lazy loading is on for it.
	 */
	private static function enabled( $context, $html ) {
		if ( ! compresso_get_setting( 'lazy_load' ) ) {
			return false;
		}
		return (bool) apply_filters( 'compresso_lazy_load_enabled', wp_lazy_loading_enabled( 'img', $context ), $context, $html );
	}

	/**
	 * wp_content_img_tag (before the <picture> wrap): one content/widget/template image core has
	 * already been through.
	 *
	 * @param string $html          The <img> tag.
	 * @param string $context       the_content, widget_block_content, template, ...
	 * @param int    $attachment_id The attachment, 0 when unknown.
	 * @return string
	 */
	public static function filter_content_img( $html, $context, $attachment_id = 0 ) {
		// Block themes filter the whole template again ('template') after the post content: an image
		// seen in an earlier pass of this request keeps the decision made then.
		static $seen = array();
		if ( isset( $seen[ $html ] ) || ! self::enabled( $context, $html ) ) {
			return $html;
		}
		$out = $html;
		if ( self::untouched( $html ) ) {
			$has_size = preg_match( '/\swidth=["\']?\d/i', $html ) && preg_match( '/\sheight=["\']?\d/i', $html );
			// Core classified an image with both sizes itself (eager on purpose or lazy), except in
			// whole block templates, where it adds nothing.
			if ( ! $has_size || 'template' === $context ) {
				$out = self::apply( $html, self::decide( $context ) );
			}
		}
		$seen[ $out ] = true;
		return $out;
	}

	/**
	 * Widget output core does not filter (Custom HTML widget, the Text widget in plain mode): every
	 * image in it.
	 *
	 * @param string $content The widget's HTML.
	 * @return string
	 */
	public static function filter_widget( $content ) {
		if ( ! is_string( $content ) || false === stripos( $content, '<img' ) ) {
			return $content;
		}
		$context = current_filter();
		return preg_replace_callback(
			'/<img\s[^>]*>/i',
			static function ( $match ) use ( $context ) {
				$html = $match[0];
				if ( ! self::enabled( $context, $html ) || ! self::untouched( $html ) ) {
					return $html;
				}
				return self::apply( $html, 'lazy' );
			},
			$content
		);
	}

	/**
	 * wp_get_loading_optimization_attributes: attachment-function images made inside a the_content
	 * filter that runs after core's wp_filter_content_tags (priority 12). Core returns nothing for them
	 * (it expects its content filter to come later, and it has already run).
	 *
	 * @param array  $attrs    What core decided.
	 * @param string $tag_name img or iframe.
	 * @param array  $attr     The tag's attributes.
	 * @param string $context  The context.
	 * @return array
	 */
	public static function filter_loading_attributes( $attrs, $tag_name, $attr, $context ) {
		if ( 'img' !== $tag_name || ! is_array( $attrs ) || $attrs || ! empty( $attr['loading'] ) || ! empty( $attr['fetchpriority'] ) ) {
			return $attrs;
		}
		if ( 'the_content' === $context || ! doing_filter( 'the_content' ) || ! self::after_core_content_filter() ) {
			return $attrs;
		}
		if ( ! self::enabled( $context, '' ) ) {
			return $attrs;
		}
		$attrs['loading'] = 'lazy';
		if ( empty( $attr['decoding'] ) ) {
			$attrs['decoding'] = 'async';
		}
		return $attrs;
	}

	/**
	 * @return bool Whether the_content is past the priority where core filters its images.
	 */
	private static function after_core_content_filter() {
		global $wp_filter;
		if ( ! isset( $wp_filter['the_content'] ) || ! method_exists( $wp_filter['the_content'], 'current_priority' ) ) {
			return false;
		}
		$core = has_filter( 'the_content', 'wp_filter_content_tags' );
		$now  = $wp_filter['the_content']->current_priority();
		return false !== $core && false !== $now && $now > $core;
	}

	/**
	 * @return bool Whether nobody (author, theme, core) set the image's loading behaviour.
	 */
	private static function untouched( $html ) {
		if ( preg_match( '/\s(loading|fetchpriority|data-no-lazy)\s*=/i', $html ) ) {
			return false;
		}
		if ( preg_match( '/\sclass\s*=\s*["\']([^"\']*)["\']/i', $html, $m ) && preg_match( '/(^|\s)(skip-lazy|no-lazy)(\s|$)/', $m[1] ) ) {
			return false;
		}
		return true;
	}

	/**
	 * For an image core could not classify: 'lcp' (the likely LCP image), 'eager' or 'lazy'.
	 * Follows core's own counting, so the two never disagree on the same page.
	 */
	private static function decide( $context ) {
		if ( in_array( $context, self::WIDGET_CONTEXTS, true ) ) {
			return 'lazy';
		}
		$header = 0 === strpos( (string) $context, 'template_part_header' );
		if ( ! $header && ! is_admin() && self::high_priority_free() ) {
			self::take_high_priority();
			wp_increase_content_media_count();
			return 'lcp';
		}
		if ( $header ) {
			return 'eager';
		}
		if ( wp_increase_content_media_count( 0 ) < wp_omit_loading_attr_threshold() && ( in_the_loop() || 'template' !== $context ) ) {
			wp_increase_content_media_count();
			return 'eager';
		}
		return 'lazy';
	}

	/**
	 * @return bool Whether no image of this page has fetchpriority="high" yet.
	 */
	private static function high_priority_free() {
		return function_exists( 'wp_high_priority_element_flag' ) ? wp_high_priority_element_flag() : ! did_action( 'compresso_lcp_taken' );
	}

	private static function take_high_priority() {
		if ( function_exists( 'wp_high_priority_element_flag' ) ) {
			wp_high_priority_element_flag( false );
		}
		do_action( 'compresso_lcp_taken' );
	}

	/**
	 * Adds the attributes of a decision, each only when the tag does not have it.
	 *
	 * @param string $html     An <img> tag.
	 * @param string $decision 'lcp', 'eager' or 'lazy'.
	 * @return string
	 */
	private static function apply( $html, $decision ) {
		$add = '';
		if ( 'lcp' === $decision ) {
			$add .= ' fetchpriority="high"';
		} else {
			if ( 'lazy' === $decision ) {
				$add .= ' loading="lazy"';
			}
			if ( ! preg_match( '/\sdecoding\s*=/i', $html ) ) {
				$add .= ' decoding="async"';
			}
		}
		if ( '' === $add ) {
			return $html;
		}
		return preg_replace( '/^(\s*<img)(?=\s)/i', '$1' . $add, $html, 1 );
	}
}
